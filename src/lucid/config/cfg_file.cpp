#include "lucid/config/cfg_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "lucid/config/reference_keys.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/util/error.h"
#include "lucid/util/input_files.h"

namespace lucid::config {

namespace {

// A cfg file holds a few dozen short lines; anything far larger is not one.
constexpr std::uintmax_t kMaxCfgBytes = 1 << 20;

std::string value_text(const YAML::Node& v, const std::string& where) {
  if (v.IsScalar()) {
    // YAML's booleans (the reference writes true/false) as lucid's flags and texts spell them:
    // resume: false is resume=False, not a checkpoint named "false".
    std::string lower = v.Scalar();
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (v.Tag() == "?" && (lower == "true" || lower == "false")) return lower == "true" ? "True" : "False";
    return v.Scalar();
  }
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

// Reads one options file into `from_file`: each key's line goes into `lines`; the reference's keys
// the command does not have go into `ignored`.
void read_file(const std::string& path, Options& from_file, std::map<std::string, int>& lines,
               std::vector<std::string>& ignored) {
  util::require_regular_file(path, "option cfg=" + path);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError("option cfg=" + path + ": cannot read the file");
  if (size > kMaxCfgBytes)
    throw UserError(path + ": " + std::to_string(size) + " bytes is not an options file (at most 1 MiB)");
  YAML::Node root;
  try {
    root = load_bounded_yaml(util::read_input_file(path, "option cfg=" + path, kMaxCfgBytes), path);
  } catch (const YAML::Exception& e) {
    throw UserError(path + ":" + std::to_string(e.mark.line >= 0 ? e.mark.line + 1 : 0) + ": " + e.msg);
  }
  if (root.IsNull()) return;  // an empty file
  if (!root.IsMap()) throw UserError(path + ": an options file is a mapping of key: value lines");
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string where = path + ":" + std::to_string(kv.first.Mark().line + 1);
    if (!kv.first.IsScalar()) throw UserError(where + ": a key is a plain name");
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) throw UserError(where + ": duplicate key '" + key.substr(0, 100) + "'");
    lines[key] = kv.first.Mark().line + 1;
    if (key == "cfg") continue;
    // An Ultralytics args.yaml holds every key of the reference: those this command does not use
    // (task, mode, the other commands' keys) are ignored and named once.
    if (!from_file.values().count(key) && reference_keys().count(key)) {
      ignored.push_back(key);
      continue;
    }
    if (kv.second.IsNull()) continue;  // null (`time:`, the reference's None): the option keeps its default
    const std::string value = value_text(kv.second, where + ": " + key);
    try {
      from_file.parse({key + "=" + value});
    } catch (const UserError& e) {
      throw UserError(where + ": " + e.what());
    }
  }
}

}  // namespace

void parse_with_cfg_file(Options& options, const std::vector<std::string>& args,
                         const std::function<void(const Options&)>& validate) {
  const Options declared = options;
  options.parse(args);
  const std::string path = options.str("cfg");
  if (path.empty() || path == "None") return;  // None: the run record's "no file"
  Options from_file = declared;
  std::map<std::string, int> lines;
  std::vector<std::string> ignored;
  read_file(path, from_file, lines, ignored);
  // A lucid run's args.yaml holds the reference's keys; lucid's own are in lucid_args.yaml beside it.
  const auto own = std::filesystem::path(path).parent_path() / kLucidArgsFile;
  if (std::filesystem::path(path).filename() == kArgsFile && std::filesystem::exists(own)) {
    std::map<std::string, int> own_lines;
    read_file(own.string(), from_file, own_lines, ignored);
    std::printf("cfg=%s: with %s beside it (lucid's own options)\n", path.c_str(), own.string().c_str());
  }
  if (!ignored.empty()) {
    std::string names;
    for (const auto& k : ignored) names += (names.empty() ? "" : ", ") + k;
    std::printf("cfg=%s: the reference's keys this command does not use, ignored: %s\n", path.c_str(), names.c_str());
  }
  if (validate) {
    try {
      validate(from_file);
    } catch (const UserError& e) {
      // The message names its option ("option epochs=abc: ..."): point at that key's line.
      const std::string what = e.what();
      for (const auto& [key, line] : lines)
        if (what.find("option " + key + "=") != std::string::npos ||
            what.find("option " + key + ":") != std::string::npos)
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
