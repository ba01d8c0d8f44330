// The user's settings file, as the reference's (~/.config/Ultralytics/settings.json, YOLO_CONFIG_DIR):
// runs_dir (the default project of every command is runs_dir/segment), datasets_dir (where a dataset
// YAML's relative `path:` is looked up when it is not found beside the YAML or in the working folder),
// weights_dir (where a released weights name such as yolo26n-seg.pt is looked up, and where the Python
// package downloads it) and tensorboard (whether `lucid train` writes TensorBoard events when tensorboard= is not
// given) and the Python package's logging integrations (clearml, comet, dvc, mlflow, neptune, wandb: whether a
// training run logs to each when its package is installed). The file is JSON: {"runs_dir": "...", "datasets_dir":
// "...", "weights_dir": "...", "tensorboard": false}; keys it lacks take their defaults, and nothing is written until
// `lucid settings key=value` or `reset` (the reference writes it on first import). Relative directories are taken from
// each command's working folder, so the defaults (runs, datasets) keep runs where the command is started.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "lucid/config/options.h"

namespace lucid::config {

struct UserSettings {
  std::string runs_dir = "runs";
  std::string datasets_dir = "datasets";
  std::string weights_dir = "weights";
  bool tensorboard = false;
  // The logging integrations of the Python package's training (docs/python.md, Integrations), each on
  // when its package is installed and its switch is true; the reference's defaults.
  bool clearml = true;
  bool comet = true;
  bool dvc = true;
  bool mlflow = true;
  bool neptune = true;
  bool wandb = false;
};

// $LUCID_CONFIG_DIR/settings.json, else $XDG_CONFIG_HOME/lucid/settings.json, else
// $HOME/.config/lucid/settings.json.
std::filesystem::path settings_file();

// The file's settings (the defaults without a file). A file that is not a JSON object, or holds an
// unknown key or a value of the wrong type, is a UserError naming the file and the key; so is a
// settings path that is not a regular file (a fifo, a device, a folder: util/input_files.h) or one
// over a megabyte, each with `lucid settings reset` as the remedy.
UserSettings load_user_settings();

// The settings as `lucid settings` takes them (key=value tokens; unknown keys get the nearest key),
// with `current` as every key's value.
Options settings_options(const UserSettings& current);
// Options read back into settings; a bad value is a UserError naming key=value.
UserSettings settings_from(const Options& options);

// The file's text for these settings (JSON, two-space indent, keys in declared order).
std::string settings_json(const UserSettings& settings);
// Writes the settings file (creating its folder), atomically; a symlink to a regular file is
// written through (the link kept).
void save_user_settings(const UserSettings& settings);
// `lucid settings reset`: the defaults written, whatever stands at the settings path. A fifo, device
// node, socket, or a symlink to anything but a regular file is removed itself (never opened or
// written through) and an empty folder too; a folder with files is a UserError saying what to move.
void reset_user_settings();

// runs_dir/segment: the default project= of train, val and predict.
std::string default_project();
// datasets_dir as a path.
std::filesystem::path datasets_dir();
// weights_dir as a path.
std::filesystem::path weights_dir();

}  // namespace lucid::config
