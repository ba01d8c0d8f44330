#include "lucid/config/user_settings.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "lucid/config/fields.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/input_files.h"

namespace lucid::config {

namespace fs = std::filesystem;

namespace {

// The integration switches by name (UserSettings' booleans after tensorboard).
std::vector<std::pair<const char*, bool UserSettings::*>> integration_switches() {
  return {{"clearml", &UserSettings::clearml}, {"comet", &UserSettings::comet},     {"dvc", &UserSettings::dvc},
          {"mlflow", &UserSettings::mlflow},   {"neptune", &UserSettings::neptune}, {"wandb", &UserSettings::wandb}};
}

bool* integration_switch(UserSettings& s, const std::string& key) {
  for (const auto& [name, member] : integration_switches())
    if (key == name) return &(s.*member);
  return nullptr;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

constexpr uint64_t kMaxSettingsBytes = 1 << 20;  // four short keys: a megabyte is far beyond any real file

// A directory setting: any non-empty path.
std::string read_directory(const std::string& key, const std::string& value) {
  if (value.empty()) throw UserError("option " + key + "=: expected a directory");
  return value;
}

}  // namespace

fs::path settings_file() {
  if (const auto dir = env("LUCID_CONFIG_DIR"); !dir.empty()) return fs::path(dir) / "settings.json";
  if (const auto xdg = env("XDG_CONFIG_HOME"); !xdg.empty()) return fs::path(xdg) / "lucid" / "settings.json";
  const auto home = env("HOME");
  if (home.empty())
    throw UserError("the settings file: neither LUCID_CONFIG_DIR, XDG_CONFIG_HOME nor HOME is set to say where it is");
  return fs::path(home) / ".config" / "lucid" / "settings.json";
}

UserSettings load_user_settings() {
  UserSettings s;
  const auto file = settings_file();
  const std::string reset = " (lucid settings reset writes the defaults)";
  std::error_code ec;
  if (fs::status(file, ec).type() == fs::file_type::not_found) return s;  // a dangling link too
  std::string text;
  try {  // a fifo would block every command, a device link be read without end: regular files only
    text = util::read_input_file(file.string(), file.string() + " (the settings file)", kMaxSettingsBytes);
  } catch (const UserError& e) {
    throw UserError(e.what() + reset);
  }
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw UserError(file.string() + ": not valid JSON" + reset);
  if (!j.is_object()) throw UserError(file.string() + ": not a JSON object of settings" + reset);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    const auto& v = it.value();
    if (key == "runs_dir" || key == "datasets_dir" || key == "weights_dir") {
      if (!v.is_string() || v.get<std::string>().empty())
        throw UserError(file.string() + ": '" + key + "' must be a directory (a non-empty string)" + reset);
      (key == "runs_dir" ? s.runs_dir : key == "datasets_dir" ? s.datasets_dir : s.weights_dir) = v.get<std::string>();
    } else if (bool* flag = key == "tensorboard" ? &s.tensorboard : integration_switch(s, key)) {
      if (!v.is_boolean()) throw UserError(file.string() + ": '" + key + "' must be true or false" + reset);
      *flag = v.get<bool>();
    } else {
      throw UserError(file.string() + ": '" + key +
                      "' is not a lucid setting (runs_dir, datasets_dir, weights_dir, tensorboard, clearml, comet, "
                      "dvc, mlflow, neptune, wandb)" +
                      reset);
    }
  }
  return s;
}

Options settings_options(const UserSettings& current) {
  std::vector<OptionSpec> specs = {
      {"runs_dir", current.runs_dir, "folder of runs: the default project= is runs_dir/segment"},
      {"datasets_dir", current.datasets_dir, "folder where a dataset YAML's relative path: is looked up last"},
      {"weights_dir", current.weights_dir, "folder where released weights (yolo26n-seg.pt ...) are looked up"},
      {"tensorboard", format_flag(current.tensorboard),
       "lucid train writes TensorBoard events when tensorboard= is not given"}};
  for (const auto& [name, member] : integration_switches())
    specs.push_back({name, format_flag(current.*member),
                     std::string("the Python package's training logs to ") + name + " when its package is installed"});
  return Options("settings", specs);
}

UserSettings settings_from(const Options& o) {
  UserSettings s;
  s.runs_dir = read_directory("runs_dir", o.str("runs_dir"));
  s.datasets_dir = read_directory("datasets_dir", o.str("datasets_dir"));
  s.weights_dir = read_directory("weights_dir", o.str("weights_dir"));
  s.tensorboard = read_flag("tensorboard", o.str("tensorboard"));
  for (const auto& [name, member] : integration_switches()) s.*member = read_flag(name, o.str(name));
  return s;
}

std::string settings_json(const UserSettings& s) {
  nlohmann::ordered_json j;
  j["runs_dir"] = s.runs_dir;
  j["datasets_dir"] = s.datasets_dir;
  j["weights_dir"] = s.weights_dir;
  j["tensorboard"] = s.tensorboard;
  for (const auto& [name, member] : integration_switches()) j[name] = s.*member;
  return j.dump(2) + "\n";
}

void save_user_settings(const UserSettings& s) {
  const auto file = settings_file();
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) throw UserError(file.parent_path().string() + ": cannot create the settings folder: " + ec.message());
  util::write_atomically(file.string(), [&](std::ostream& out) { out << settings_json(s); });
}

void reset_user_settings() {
  const auto file = settings_file();
  std::error_code ec;
  const auto own = fs::symlink_status(file, ec).type();
  const auto target = fs::status(file, ec).type();
  const bool writable = own == fs::file_type::not_found || target == fs::file_type::regular;
  if (!writable) {
    // A fifo, device node, socket or a link to one (or to a folder, or dangling, or a loop) is
    // unlinked itself, never opened; rmdir removes a folder only while it is empty.
    const bool folder = own == fs::file_type::directory;
    if (!fs::remove(file, ec) || ec)
      throw UserError(file.string() + (folder ? ": is a folder holding files, not the settings file; move it away "
                                                "(or rm -r it), then run lucid settings reset again"
                                              : ": is not a regular file and cannot be removed (" + ec.message() +
                                                    "); remove it, then run lucid settings reset again"));
    std::printf("Removed %s (%s), which stood where the settings file belongs\n", file.string().c_str(),
                folder ? "an empty folder" : "not a regular file");
  }
  save_user_settings(UserSettings{});
}

std::string default_project() { return (fs::path(load_user_settings().runs_dir) / "segment").string(); }

fs::path datasets_dir() { return load_user_settings().datasets_dir; }

fs::path weights_dir() { return load_user_settings().weights_dir; }

}  // namespace lucid::config
