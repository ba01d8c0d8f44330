// Subcommands of the `lucid` command; each takes the tokens after its name and returns an exit code.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace lucid::config {
class Options;
}

namespace lucid::cli {

// `lucid ARGS...`: the command's exit code (0, 1 for an error, printed as one line, 2 for bad usage).
int run_command_line(std::vector<std::string> args);

int model_command(const std::vector<std::string>& args);
int train_command(const std::vector<std::string>& args);
int coco_eval_command(const std::vector<std::string>& args);
int data_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
int val_command(const std::vector<std::string>& args);
int predict_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int checks_command(const std::vector<std::string>& args);         // versions, devices, optional parts
int settings_command(const std::vector<std::string>& args);       // the user's settings file
int predict_bench_command(const std::vector<std::string>& args);  // `lucid bench predict`
int cfg_command(const std::vector<std::string>& args);            // prints the default configuration
int copy_cfg_command(const std::vector<std::string>& args);       // writes it to default_copy.yaml

// The declared options of val, predict and export (lucid cfg lists them after train's).
config::Options val_options();
config::Options predict_options();
config::Options export_options();

// The action of `lucid COMMAND ACTION [key=value ...]` (data, model): none after printing the usage
// for no words (exit code 2) or --help / -h (0); a word not among `actions` is an error naming it,
// with the usage.
std::optional<std::string> action_word(const std::vector<std::string>& args, const std::string& command,
                                       const std::string& usage, const std::vector<std::string>& actions,
                                       int& exit_code);

// save_pt=True of lucid train: a UserError before training unless the pt writer can run (the
// exporter's Python, LUCID_PYTHON, with the ultralytics and safetensors packages, and
// scripts/ultralytics_weights.py); then, after the fit, weights/X.pt beside each X.safetensors of
// best and last, written by `lucid export format=pt`.
void require_pt_writer(const std::string& option);
void write_run_pt(const std::string& run_dir);

// The embedded synthetic dataset's YAML (written once into the cache folder): the data of
// `lucid train` without data=.
std::string default_dataset();

}  // namespace lucid::cli
