// `lucid cfg` and `lucid copy-cfg`, as the reference's `yolo cfg` and `yolo copy-cfg`: the default
// configuration as one YAML mapping, made from lucid's own option declarations (train_fields() and
// the val, predict and export field lists): every option of train, then the options of val,
// predict and export that train lacks, each with its default and its help as a comment. An empty
// value (YAML null) is one resolved at run time, as its help says. `lucid train cfg=FILE` reads the
// file: the reference's keys of the other commands are ignored there (config/cfg_file.h), so lucid's
// own keys of the other commands are written commented out.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/config/reference_keys.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCopyName = "default_copy.yaml";

// A default as a YAML scalar: plain where YAML reads it back as the same text, else single-quoted.
std::string yaml_value(const std::string& v) {
  if (v.empty()) return "";
  bool plain = v.find_first_of(":#{}[]&*!|>'\"%@`") == std::string::npos && v.front() != '-' && v.front() != '?' &&
               v.front() != ' ' && v.back() != ' ';
  if (plain) return v;
  std::string quoted = "'";
  for (char c : v) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

std::string line(const config::OptionSpec& s, bool commented, const std::string& command) {
  std::string text = (commented ? "# " : "") + s.key + ":";
  const auto value = yaml_value(s.default_value);
  if (!value.empty()) text += " " + value;
  std::string help = s.help;
  for (auto& c : help)
    if (c == '\n') c = ' ';
  return text + " # " + (command.empty() ? "" : "(" + command + ") ") + help + "\n";
}

std::string default_configuration() {
  std::ostringstream o;
  o << "# lucid-yolo " << LUCID_VERSION << " default configuration (lucid cfg; lucid copy-cfg writes it to "
    << kCopyName
    << ")\n"
       "# The options of lucid train, then those of val, predict and export that train lacks. An empty\n"
       "# value is resolved at run time (its comment says how). lucid train cfg=FILE reads this file and\n"
       "# ignores the other commands' keys; lucid's own keys of the other commands are commented out.\n\n"
       "# train -------------------------------------------------------------------------------------\n";
  std::set<std::string> written;
  const auto train = engine::train_options();
  for (const auto& s : train.specs()) {
    if (s.key == "cfg") continue;  // a cfg file's own cfg key is ignored
    o << line(s, false, "");
    written.insert(s.key);
  }
  const std::pair<const char*, config::Options> others[] = {
      {"val", val_options()}, {"predict", predict_options()}, {"export", export_options()}};
  for (const auto& [command, options] : others) {
    o << "\n# " << command << " " << std::string(88 - std::string(command).size(), '-') << "\n";
    for (const auto& s : options.specs()) {
      if (!written.insert(s.key).second) continue;
      o << line(s, config::reference_keys().count(s.key) == 0, command);
    }
  }
  return o.str();
}

}  // namespace

int cfg_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: lucid cfg\n\nprints the default configuration of lucid train, val, predict and export as "
                 "YAML (lucid copy-cfg writes it to "
              << kCopyName << ")\n";
    return 0;
  }
  if (!args.empty()) throw UserError("'" + args[0] + "': lucid cfg takes no options");
  std::cout << default_configuration();
  return 0;
}

int copy_cfg_command(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: lucid copy-cfg\n\nwrites the default configuration (lucid cfg) to " << kCopyName
              << " in the working folder, for lucid train cfg=" << kCopyName << "\n";
    return 0;
  }
  if (!args.empty()) throw UserError("'" + args[0] + "': lucid copy-cfg takes no options");
  const fs::path out = fs::current_path() / kCopyName;
  const fs::path tmp = out.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << default_configuration();
    if (!f.flush()) throw UserError(tmp.string() + ": cannot write the file");
  }
  fs::rename(tmp, out);
  std::printf(
      "the default configuration (lucid cfg) written to %s\nExample lucid command with this new custom cfg:\n    "
      "lucid train cfg='%s' imgsz=320 batch=8\n",
      out.string().c_str(), out.string().c_str());
  return 0;
}

}  // namespace lucid::cli
