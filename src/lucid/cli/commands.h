// Subcommands of the `lucid` command; each takes the tokens after its name and returns an exit code.
#pragma once
#include <string>
#include <vector>

namespace lucid::cli {

int model_command(const std::vector<std::string>& args);
int train_command(const std::vector<std::string>& args);
int coco_eval_command(const std::vector<std::string>& args);
int data_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);

}  // namespace lucid::cli
