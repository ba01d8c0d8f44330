// The formats `lucid export` writes, one entry each: the output name, which format options apply,
// and the arguments of its exporter (scripts/deploy_export.py, one module per format under
// scripts/deploy_formats/). docs/deploy.md describes each format's output and runtime.
#pragma once
#include <string>
#include <vector>

#include "lucid/config/options.h"

namespace lucid::cli {

struct ExportFormat {
  std::string name;                  // the format= value
  std::string suffix;                // appended to the model's stem for the default out=
  std::vector<std::string> options;  // the format options (beyond model, format, imgsz, out) it takes
  bool half_default = false;         // half= when not given
  bool python = true;                // made by deploy_export.py (else written by lucid itself)
  std::string alias = "";            // another format= value for it (an earlier name), or empty
};

// Every format, in the order docs/deploy.md lists them.
const std::vector<ExportFormat>& export_formats();
// The format named by format= (its name or alias); an unknown name is a UserError listing the formats.
const ExportFormat& find_export_format(const std::string& name);
// Refuses format options given for a format that does not take them, and option combinations that
// do not apply (conf= without nms=True, int8= with half=), naming the option.
void check_format_options(const ExportFormat& format, const config::Options& options);
// deploy_export.py's arguments after the format, weights ("{weights}") and output file: the
// options this format takes, as given.
std::vector<std::string> exporter_arguments(const ExportFormat& format, const config::Options& options, int64_t imgsz,
                                            const std::string& device, bool half);

}  // namespace lucid::cli
