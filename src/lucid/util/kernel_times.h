// Device time of every CUDA kernel, copy and fill, charged to the stage ranges of trace.h
// (`lucid train kernel_times=N`): where a step's device time goes, kernel by kernel, which the
// stage clock cannot say for a step whose device work overlaps its dispatch.
//   KernelClock runs PyTorch's profiler (Kineto over CUPTI) on the calling thread and its autograd
//   workers. While it runs, each TraceRange of that thread is also a profiler scope, so a kernel is
//   charged to the ranges that were open when the host operation that launched it began, nested as
//   "loss/assign" (a recording's replay charges its kernels to the range that replays it).
// Profiling slows the host; the device times it reports are the kernels' own.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace lucid::util {

class KernelClock {
 public:
  // Starts profiling (one clock at a time per process). Throws std::runtime_error where the
  // profiler cannot start.
  KernelClock();
  ~KernelClock();  // stops profiling if stop() was not called
  KernelClock(const KernelClock&) = delete;
  KernelClock& operator=(const KernelClock&) = delete;

  // Waits for the device, stops profiling and sums the device time per stage path and per kernel
  // over the `steps` steps profiled: {"steps", "device_ms", "stages": [{stage, kernels, device_ms,
  // ms_per_step}], "kernels": [{name, stage, calls, device_ms}] (the `top` costliest, costliest
  // first; kAllKernels: every one)}.
  static constexpr int64_t kAllKernels = std::numeric_limits<int64_t>::max();
  nlohmann::ordered_json stop(int64_t steps, int64_t top = 30);
  // A summary as an aligned text table, with its `rows` costliest kernels.
  static std::string table(const nlohmann::ordered_json& summary, size_t rows = 30);

  // Whether a clock runs on the calling thread (TraceRange opens a profiler scope then).
  static bool running_here();

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// The attribution KernelClock::stop() applies, on plain intervals (nanoseconds): each of
// `launches` (host start times) gets the names of the `ranges` containing it, outermost first,
// joined by '/' ("" where none does). Ranges must nest, as those of one thread do.
struct NamedInterval {
  uint64_t begin = 0, end = 0;
  std::string name;
};
std::vector<std::string> enclosing_paths(std::vector<NamedInterval> ranges, const std::vector<uint64_t>& launches);

}  // namespace lucid::util
