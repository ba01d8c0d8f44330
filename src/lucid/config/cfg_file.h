// cfg=FILE.yaml: options read from a YAML mapping of key: value, as the reference's
// `yolo cfg=FILE.yaml`; the options given on the command line win over the file's (8.4.190).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "lucid/config/options.h"

namespace lucid::config {

// Parses the command line `args` into `options`; where they name cfg=FILE, the file's keys are
// applied first and `args` again over them. Keys the command does not have, values that are
// mappings, a file that is not a mapping and duplicate keys are UserErrors naming the file and line
// (and the key). A null value (`time:`) keeps the option's default; a sequence becomes its items
// joined by commas (freeze: [0, 1]); cfg inside the file is ignored, as the reference ignores it.
// `validate` (e.g. the command's typed view) is run on the file's values alone, so that a bad value
// there is an error naming the file and the key's line.
void parse_with_cfg_file(Options& options, const std::vector<std::string>& args,
                         const std::function<void(const Options&)>& validate = {});

}  // namespace lucid::config
