// The `lucid` executable: the command line of cli/command_line.cpp.
#include <string>
#include <vector>

#include "lucid/cli/commands.h"

int main(int argc, char** argv) {
  return lucid::cli::run_command_line(std::vector<std::string>(argv + 1, argv + argc));
}
