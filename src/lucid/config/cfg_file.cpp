#include "lucid/config/cfg_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>

#include "lucid/util/error.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/util/input_files.h"

namespace lucid::config {

namespace {

// A cfg file holds a few dozen short lines; anything far larger is not one.
constexpr std::uintmax_t kMaxCfgBytes = 1 << 20;

std::string value_text(const YAML::Node& v, const std::string& where) {
  if (v.IsNull()) return "";
  if (v.IsScalar()) return v.Scalar();
  if (v.IsSequence()) {
    std::string out;
    for (const auto& item : v) {
      if (!item.IsScalar()) throw UserError(where + ": a list of plain values is expected");
      out += (out.empty() ? "" : ",") + item.Scalar();
    }
    return out;
  }
  throw UserError(where + ": a mapping is not an option value");
}

}  // namespace

void parse_with_cfg_file(Options& options, const std::vector<std::string>& args,
                         const std::function<void(const Options&)>& validate) {
  const Options declared = options;
  options.parse(args);
  const std::string path = options.str("cfg");
  if (path.empty() || path == "None") return;  // None: the run record's "no file"
  util::require_regular_file(path, "option cfg=" + path);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError("option cfg=" + path + ": cannot read the file");
  if (size > kMaxCfgBytes) throw UserError(path + ": " + std::to_string(size) + " bytes is not an options file (at most 1 MiB)");
  YAML::Node root;
  try {
    root = load_bounded_yaml(util::read_input_file(path, "option cfg=" + path, kMaxCfgBytes), path);
  } catch (const YAML::Exception& e) {
    throw UserError(path + ":" + std::to_string(e.mark.line >= 0 ? e.mark.line + 1 : 0) + ": " + e.msg);
  }
  if (root.IsNull()) return;  // an empty file
  if (!root.IsMap()) throw UserError(path + ": an options file is a mapping of key: value lines");
  Options from_file = declared;
  std::map<std::string, int> lines;
  for (const auto& kv : root) {
    const std::string where = path + ":" + std::to_string(kv.first.Mark().line + 1);
    if (!kv.first.IsScalar()) throw UserError(where + ": a key is a plain name");
    const std::string key = kv.first.Scalar();
    if (!lines.emplace(key, kv.first.Mark().line + 1).second)
      throw UserError(where + ": duplicate key '" + key.substr(0, 100) + "'");
    if (key == "cfg") continue;
    const std::string value = value_text(kv.second, where + ": " + key);
    try {
      from_file.parse({key + "=" + value});
    } catch (const UserError& e) {
      throw UserError(where + ": " + e.what());
    }
  }
  if (validate) {
    try {
      validate(from_file);
    } catch (const UserError& e) {
      // The message names its option ("option epochs=abc: ..."): point at that key's line.
      const std::string what = e.what();
      for (const auto& [key, line] : lines)
        if (what.find("option " + key + "=") != std::string::npos || what.find("option " + key + ":") != std::string::npos)
          throw UserError(path + ":" + std::to_string(line) + ": " + what);
      throw UserError(path + ": " + what);
    }
  }
  // The command line wins: its options over the file's.
  Options merged = declared;
  std::vector<std::string> tokens;
  for (const auto& [key, value] : from_file.values())
    if (from_file.given(key)) tokens.push_back(key + "=" + value);
  merged.parse(tokens);
  merged.parse(args);
  options = merged;
}

}  // namespace lucid::config
