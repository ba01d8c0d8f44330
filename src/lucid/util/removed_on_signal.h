// Temporary files that must not outlive a process stopped by Ctrl-C or `kill` (SIGINT, SIGTERM):
// a destructor never runs then. While a RemovedOnSignal lives, its path is unlinked by the signal
// handler, which then passes the signal on (to the handler installed before, or the default
// action, so the process still ends by that signal). SIGKILL cannot be caught: a file it leaves is
// named `<name>.tmp.<pid>` for the tidy-ups that know that pattern.
#pragma once
#include <string>

namespace lucid::util {

class RemovedOnSignal {
 public:
  // Registers path (at most 64 at once and 4095 bytes each; beyond that the file is only removed
  // by its owner, as before).
  explicit RemovedOnSignal(const std::string& path);
  ~RemovedOnSignal();  // unregisters; the owner removes or renames the file itself
  RemovedOnSignal(const RemovedOnSignal&) = delete;
  RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace lucid::util
