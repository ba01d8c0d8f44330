#include "lucid/util/removed_on_signal.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace lucid::util {

namespace {

constexpr int kSlots = 64;
constexpr int kGroupSlots = 16;
constexpr size_t kPathBytes = 4096;
constexpr int kEndingSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kGraceSteps = 40;  // of 50 ms: a child's two seconds to end on SIGTERM

// Written before a slot is marked used and read only while it is: the handler reads no half path.
std::array<std::array<char, kPathBytes>, kSlots> g_paths{};
std::array<std::atomic<bool>, kSlots> g_used{};
std::array<std::atomic<pid_t>, kGroupSlots> g_groups{};  // 0: free
std::array<struct sigaction, 32> g_previous{};           // by signal number

// Everything here is async-signal-safe: kill, waitpid, nanosleep.
void end_group(pid_t group) {
  ::kill(-group, SIGTERM);
  const struct timespec step { 0, 50'000'000 };
  for (int i = 0; i < kGraceSteps; ++i) {
    const pid_t r = ::waitpid(group, nullptr, WNOHANG);
    if (r == group || (r < 0 && errno != EINTR)) break;  // ended (or not ours to wait for)
    ::nanosleep(&step, nullptr);
  }
  ::kill(-group, SIGKILL);  // whatever of the group is left, the leader's own children included
}

void on_signal(int sig) {
  const int saved_errno = errno;
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load(std::memory_order_acquire)) ::unlink(g_paths[i].data());
  for (auto& g : g_groups)
    if (const pid_t group = g.exchange(0); group > 0) end_group(group);
  errno = saved_errno;
  const struct sigaction& previous = g_previous[sig];
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && !(previous.sa_flags & SA_SIGINFO)) {
    previous.sa_handler(sig);
    return;
  }
  ::signal(sig, SIG_DFL);  // end the process by this signal, as without the handler
  ::raise(sig);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (const int sig : kEndingSignals) sigaddset(&action.sa_mask, sig);  // one ending at a time
    for (const int sig : kEndingSignals) {
      ::sigaction(sig, nullptr, &g_previous[sig]);
      if (g_previous[sig].sa_handler == SIG_IGN) continue;  // a signal the process ignores stays ignored
      ::sigaction(sig, &action, nullptr);
    }
  });
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const std::string& path) {
  if (path.size() >= kPathBytes) return;
  install_once();
  static std::mutex claim;
  std::lock_guard<std::mutex> lock(claim);
  for (int i = 0; i < kSlots; ++i)
    if (!g_used[i].load(std::memory_order_relaxed)) {
      std::memcpy(g_paths[i].data(), path.c_str(), path.size() + 1);
      g_used[i].store(true, std::memory_order_release);
      slot_ = i;
      return;
    }
}

RemovedOnSignal::~RemovedOnSignal() {
  if (slot_ >= 0) g_used[slot_].store(false, std::memory_order_release);
}

EndedOnSignal::EndedOnSignal(pid_t group) {
  if (group <= 0) return;
  install_once();
  for (int i = 0; i < kGroupSlots; ++i) {
    pid_t free = 0;
    if (g_groups[i].compare_exchange_strong(free, group)) {
      slot_ = i;
      return;
    }
  }
}

EndedOnSignal::~EndedOnSignal() {
  if (slot_ >= 0) g_groups[slot_].store(0);
}

}  // namespace lucid::util
