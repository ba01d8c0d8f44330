// A minimal parallel loop: indices 0..n-1 handed out to worker threads in order of request. Results
// must be written per index (never appended), so that they do not depend on scheduling.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace lucid::util {

// The CPU count (hardware threads), at least 1.
inline int cpu_count() { return int(std::max(1u, std::thread::hardware_concurrency())); }

// threads <= 0: one per hardware thread, at most 16; small loops run on the calling thread. An
// exception thrown by `f` stops the hand-out of further indices and is rethrown on the caller.
// Threads that cannot be started are done without: the calling thread takes part in the loop.
template <class F>
void parallel_for(size_t n, F&& f, int threads = 0) {
  size_t t = threads > 0 ? size_t(threads) : std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 16);
  t = std::min(t, n / 4 + 1);
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 0; k + 1 < t; ++k) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had (a resource limit): fewer do the same work
    }
  }
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace lucid::util
