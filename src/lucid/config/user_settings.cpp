#include "lucid/config/user_settings.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lucid/config/fields.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::config {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

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
  std::error_code ec;
  if (!fs::exists(file, ec)) return s;
  std::ifstream in(file);
  if (!in) throw UserError(file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string reset = " (lucid settings reset writes the defaults)";
  if (j.is_discarded()) throw UserError(file.string() + ": not valid JSON" + reset);
  if (!j.is_object()) throw UserError(file.string() + ": not a JSON object of settings" + reset);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& key = it.key();
    const auto& v = it.value();
    if (key == "runs_dir" || key == "datasets_dir") {
      if (!v.is_string() || v.get<std::string>().empty())
        throw UserError(file.string() + ": '" + key + "' must be a directory (a non-empty string)" + reset);
      (key == "runs_dir" ? s.runs_dir : s.datasets_dir) = v.get<std::string>();
    } else if (key == "tensorboard") {
      if (!v.is_boolean()) throw UserError(file.string() + ": 'tensorboard' must be true or false" + reset);
      s.tensorboard = v.get<bool>();
    } else {
      throw UserError(file.string() + ": '" + key + "' is not a lucid setting (runs_dir, datasets_dir, tensorboard)" +
                      reset);
    }
  }
  return s;
}

Options settings_options(const UserSettings& current) {
  return Options(
      "settings",
      {{"runs_dir", current.runs_dir, "folder of runs: the default project= is runs_dir/segment"},
       {"datasets_dir", current.datasets_dir, "folder where a dataset YAML's relative path: is looked up last"},
       {"tensorboard", format_flag(current.tensorboard),
        "lucid train writes TensorBoard events when tensorboard= is not given"}});
}

UserSettings settings_from(const Options& o) {
  UserSettings s;
  s.runs_dir = read_directory("runs_dir", o.str("runs_dir"));
  s.datasets_dir = read_directory("datasets_dir", o.str("datasets_dir"));
  s.tensorboard = read_flag("tensorboard", o.str("tensorboard"));
  return s;
}

std::string settings_json(const UserSettings& s) {
  nlohmann::ordered_json j;
  j["runs_dir"] = s.runs_dir;
  j["datasets_dir"] = s.datasets_dir;
  j["tensorboard"] = s.tensorboard;
  return j.dump(2) + "\n";
}

void save_user_settings(const UserSettings& s) {
  const auto file = settings_file();
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) throw UserError(file.parent_path().string() + ": cannot create the settings folder: " + ec.message());
  util::write_atomically(file.string(), [&](std::ostream& out) { out << settings_json(s); });
}

std::string default_project() { return (fs::path(load_user_settings().runs_dir) / "segment").string(); }

fs::path datasets_dir() { return load_user_settings().datasets_dir; }

}  // namespace lucid::config
