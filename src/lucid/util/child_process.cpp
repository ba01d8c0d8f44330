#include "lucid/util/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "lucid/util/error.h"
#include "lucid/util/removed_on_signal.h"

extern char** environ;

namespace lucid::util {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kGrace = std::chrono::seconds(2);

int exit_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// In the child between fork and exec only async-signal-safe calls: its own group, death with its
// parent, the signal mask cleared, then exec; a failed exec reports its errno through `report`.
[[noreturn]] void exec_child(char* const* args, pid_t parent, int report) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before the request took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(args[0], args, environ);
  const int err = errno;
  (void)!::write(report, &err, sizeof err);
  ::_exit(127);
}

// Waits for pid, or for `until`; true when it ended (status set).
bool wait_until(pid_t pid, std::chrono::steady_clock::time_point until, int& status) {
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) throw UserError("lost track of child process " + std::to_string(pid));
    if (std::chrono::steady_clock::now() >= until) return false;
    struct timespec step {
      0, std::chrono::duration_cast<std::chrono::nanoseconds>(kPoll).count()
    };
    ::nanosleep(&step, nullptr);
  }
}

}  // namespace

ChildOutcome run_child(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) throw UserError("run_child: no program given");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw UserError("cannot start " + argv[0] + ": " + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(args.data(), parent, report[1]);
  const int fork_error = errno;
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    throw UserError("cannot start " + argv[0] + ": " + std::strerror(fork_error));
  }
  ::setpgid(pid, pid);  // as the child does: the group exists whichever runs first
  const EndedOnSignal ended(pid);
  int exec_error = 0;
  ssize_t got;
  while ((got = ::read(report[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  int status = 0;
  if (got > 0) {  // exec failed: the child has exited with 127
    wait_until(pid, std::chrono::steady_clock::time_point::max(), status);
    throw UserError("cannot start " + argv[0] + ": " + std::strerror(exec_error));
  }
  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::min(timeout_s, 1e7)));  // beyond ~4 months: no overflow
  const auto start = std::chrono::steady_clock::now();
  if (wait_until(pid, start + limit, status)) return {exit_status(status), false};
  ::kill(-pid, SIGTERM);
  if (!wait_until(pid, std::chrono::steady_clock::now() + kGrace, status)) {
    ::kill(-pid, SIGKILL);
    wait_until(pid, std::chrono::steady_clock::time_point::max(), status);
  }
  ::kill(-pid, SIGKILL);  // the leader's own children, had they outlived it
  return {exit_status(status), true};
}

}  // namespace lucid::util
