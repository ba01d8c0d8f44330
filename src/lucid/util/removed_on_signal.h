// Temporary files and child processes that must not outlive a run stopped by a signal that ends it
// (SIGINT from Ctrl-C, SIGTERM from `kill`, SIGHUP from a closed terminal, SIGQUIT from Ctrl-\): a
// destructor never runs then. One handler serves every command: while a RemovedOnSignal lives, its
// path is unlinked; while an EndedOnSignal lives, its child's process group is sent SIGTERM and, if
// its leader has not ended within two seconds, SIGKILL. The handler then passes the signal on (to
// the handler installed before, or the default action, so the process still ends by that signal).
// SIGKILL cannot be caught: a file it leaves is named `<name>.tmp.<pid>` for the tidy-ups that know
// that pattern (util/files.h remove_dead_temporaries), and children die with their parent
// (util/child_process.h).
#pragma once
#include <sys/types.h>

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

class EndedOnSignal {
 public:
  // Registers the process group `group` (a child made leader of its own group; at most 16 at once).
  explicit EndedOnSignal(pid_t group);
  ~EndedOnSignal();  // unregisters; the owner waits for the child itself
  EndedOnSignal(const EndedOnSignal&) = delete;
  EndedOnSignal& operator=(const EndedOnSignal&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace lucid::util
