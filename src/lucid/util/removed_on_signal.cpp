#include "lucid/util/removed_on_signal.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

namespace lucid::util {

namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;

// Written before a slot is marked used and read only while it is: the handler reads no half path.
std::array<std::array<char, kPathBytes>, kSlots> g_paths{};
std::array<std::atomic<bool>, kSlots> g_used{};
struct sigaction g_previous_int {
}, g_previous_term{};

void on_signal(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load(std::memory_order_acquire)) ::unlink(g_paths[i].data());
  const struct sigaction& previous = sig == SIGINT ? g_previous_int : g_previous_term;
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
    for (auto [sig, previous] : {std::pair{SIGINT, &g_previous_int}, std::pair{SIGTERM, &g_previous_term}}) {
      ::sigaction(sig, nullptr, previous);
      if (previous->sa_handler == SIG_IGN) continue;  // a signal the process ignores stays ignored
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

}  // namespace lucid::util
