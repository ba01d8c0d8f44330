// A program lucid runs for a while and waits for (the project's Python for an export): it must never
// outlive lucid nor run without end. The child leads its own process group, which lucid ends when a
// signal ends lucid (removed_on_signal.h), when lucid dies without a handler (the child asked the
// kernel for SIGKILL at its parent's death, PR_SET_PDEATHSIG) and when the time allowed is up.
#pragma once
#include <string>
#include <vector>

namespace lucid::util {

struct ChildOutcome {
  int status = 0;          // the exit code, or 128 + the signal that ended it
  bool timed_out = false;  // ended by run_child after timeout_s
};

// Runs argv[0] (a path, no shell) with argv and this process's environment and output, and waits
// for it at most timeout_s seconds (then its group gets SIGTERM, and SIGKILL two seconds later).
// A program that cannot be started is a UserError naming it.
ChildOutcome run_child(const std::vector<std::string>& argv, double timeout_s);

}  // namespace lucid::util
