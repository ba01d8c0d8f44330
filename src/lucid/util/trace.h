// NVTX ranges, so that an Nsight Systems trace attributes host and device time to the fit's stages
// (data, shared features, heads, loss, backward, each optimizer stage, EMA, validation). A range
// costs a few hundred nanoseconds and nothing when no profiler is attached.
#pragma once

namespace lucid::util {

class TraceRange {
 public:
  explicit TraceRange(const char* name);
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;
};

}  // namespace lucid::util
