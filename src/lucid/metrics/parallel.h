// A minimal parallel loop for CPU-bound metric work: workers pull indices from a shared counter.
// The first exception (by index) thrown by `fn` is rethrown on the calling thread after all
// workers stop, so failures are reported deterministically.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lucid::metrics {

inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls fn(i) for every i in [0, n); `grain` indices are claimed at a time.
template <typename F>
void parallel_for(size_t n, int threads, size_t grain, const F& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t chunks = (n + grain - 1) / grain;
  const size_t workers = std::min<size_t>(static_cast<size_t>(resolve_threads(threads)), chunks);
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  size_t error_index = n;
  auto work = [&] {
    for (;;) {
      const size_t c = next.fetch_add(1);
      if (c >= chunks) return;
      const size_t end = std::min(n, (c + 1) * grain);
      for (size_t i = c * grain; i < end; ++i) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (i < error_index) {
            error_index = i;
            error = std::current_exception();
          }
          break;
        }
      }
    }
  };
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(workers - 1);
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace lucid::metrics
