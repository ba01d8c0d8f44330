// Stage ranges of a fit (data, upload, shared features, heads, loss, backward, clip gradients, each
// optimizer stage, EMA, validation).
//   NVTX: every range is an NVTX range, so that an Nsight Systems trace attributes host and device
//         time to the stages. A range costs a few hundred nanoseconds and nothing more when no
//         profiler is attached.
//   StageClock: while one runs (`lucid train stage_times=True`), every range also measures its host
//         time (the dispatching thread's wall time inside it) and, on CUDA, its device time: the
//         time between two events recorded on the current stream at its ends, which is how long
//         the device took from the range's first queued work to its last. Recording the events
//         adds a few microseconds of host time per range and never synchronises; summary() does,
//         once.
//   KernelClock (kernel_times.h): while one runs, every range of its thread is also a profiler
//         scope, to which the kernels launched inside it are charged.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>

namespace at {
struct RecordFunction;
}

namespace lucid::util {

class TraceRange {
 public:
  explicit TraceRange(const char* name);  // name: a string literal (kept by pointer)
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  int64_t entry_ = -1;                         // the running StageClock's record, if any
  std::unique_ptr<at::RecordFunction> scope_;  // the running KernelClock's scope, if any
};

class StageClock {
 public:
  // Starts measuring the ranges of the calling thread (one clock at a time per process); `cuda`:
  // also device times on the current CUDA device.
  explicit StageClock(bool cuda);
  ~StageClock();
  StageClock(const StageClock&) = delete;
  StageClock& operator=(const StageClock&) = delete;

  // Per range name in order of first use: calls, host_ms, and with CUDA device_ms (totals). Waits
  // for the device.
  nlohmann::ordered_json summary() const;
  // The summary as an aligned text table.
  static std::string table(const nlohmann::ordered_json& summary);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace lucid::util
