#include <algorithm>
#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/util/error.h"

namespace lucid::cli {

std::optional<std::string> action_word(const std::vector<std::string>& args, const std::string& command,
                                       const std::string& usage, const std::vector<std::string>& actions,
                                       int& exit_code) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage;
    exit_code = args.empty() ? 2 : 0;
    return std::nullopt;
  }
  if (std::find(actions.begin(), actions.end(), args[0]) == actions.end())
    throw UserError("unknown " + command + " action '" + args[0] + "'\n" + usage);
  return args[0];
}

}  // namespace lucid::cli
