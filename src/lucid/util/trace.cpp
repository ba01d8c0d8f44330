#include "lucid/util/trace.h"

#include <ATen/record_function.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lucid/util/kernel_times.h"

namespace lucid::util {

namespace {
using Clock = std::chrono::steady_clock;
}

struct StageClock::State {
  bool cuda = false;
  std::thread::id thread;
  struct Entry {
    const char* name;
    Clock::time_point begin, end;
    cudaEvent_t start = nullptr, stop = nullptr;  // null where no event was recorded (capture)
  };
  std::vector<Entry> entries;
  std::vector<cudaEvent_t> events;  // every event created, destroyed with the clock
  size_t next_event = 0;

  // Events come from blocks made ahead, so that creating them is rarely inside a range.
  cudaEvent_t event() {
    if (next_event == events.size()) {
      for (int i = 0; i < 1024; ++i) {
        cudaEvent_t e;
        if (cudaEventCreate(&e) != cudaSuccess) throw std::runtime_error("stage times: cudaEventCreate failed");
        events.push_back(e);
      }
    }
    return events[next_event++];
  }
  // Events recorded while the stream is being captured would become graph nodes.
  bool stream_capturing(cudaStream_t stream) const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
  }
};

namespace {
std::mutex clock_mutex;  // serialises starting and stopping clocks
std::atomic<StageClock::State*> running{nullptr};
}  // namespace

TraceRange::TraceRange(const char* name) {
  nvtxRangePushA(name);
  if (KernelClock::running_here()) {
    scope_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (scope_->isActive())
      scope_->before(std::string_view(name), c10::ArrayRef<const c10::IValue>{});
    else
      scope_.reset();
  }
  auto* s = running.load(std::memory_order_relaxed);
  if (!s || std::this_thread::get_id() != s->thread) return;
  StageClock::State::Entry e{name, Clock::now(), {}, nullptr, nullptr};
  if (s->cuda) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    if (!s->stream_capturing(stream)) {
      e.start = s->event();
      cudaEventRecord(e.start, stream);
    }
  }
  entry_ = static_cast<int64_t>(s->entries.size());
  s->entries.push_back(e);
}

TraceRange::~TraceRange() {
  scope_.reset();
  nvtxRangePop();
  auto* s = running.load(std::memory_order_relaxed);
  if (entry_ < 0 || !s || entry_ >= static_cast<int64_t>(s->entries.size())) return;
  auto& e = s->entries[static_cast<size_t>(entry_)];
  if (e.start) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    if (!s->stream_capturing(stream)) {
      e.stop = s->event();
      cudaEventRecord(e.stop, stream);
    }
  }
  e.end = Clock::now();
}

StageClock::StageClock(bool cuda) : s_(std::make_unique<State>()) {
  s_->cuda = cuda;
  s_->thread = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(clock_mutex);
  if (running.load()) throw std::logic_error("stage times: a StageClock is already running");
  running.store(s_.get());
}

StageClock::~StageClock() {
  {
    std::lock_guard<std::mutex> lock(clock_mutex);
    running.store(nullptr);
  }
  for (auto e : s_->events) cudaEventDestroy(e);
}

nlohmann::ordered_json StageClock::summary() const {
  if (s_->cuda) cudaDeviceSynchronize();
  struct Total {
    int64_t calls = 0;
    double host_ms = 0, device_ms = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Total> totals;
  for (const auto& e : s_->entries) {
    if (!totals.count(e.name)) order.push_back(e.name);
    auto& t = totals[e.name];
    ++t.calls;
    t.host_ms += std::chrono::duration<double, std::milli>(e.end - e.begin).count();
    float ms = 0;
    if (e.start && e.stop && cudaEventElapsedTime(&ms, e.start, e.stop) == cudaSuccess) t.device_ms += ms;
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& name : order) {
    const auto& t = totals[name];
    j[name] = {{"calls", t.calls}, {"host_ms", t.host_ms}};
    if (s_->cuda) j[name]["device_ms"] = t.device_ms;
  }
  return j;
}

std::string StageClock::table(const nlohmann::ordered_json& summary) {
  std::string out = "stage times (totals over the fit):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-24s %8s %12s %12s\n", "range", "calls", "host ms", "device ms");
  out += line;
  for (auto it = summary.begin(); it != summary.end(); ++it) {
    const auto& v = it.value();
    char device[32] = "-";
    if (v.contains("device_ms")) std::snprintf(device, sizeof device, "%.1f", v["device_ms"].get<double>());
    std::snprintf(line, sizeof line, "  %-24s %8lld %12.1f %12s\n", it.key().c_str(),
                  static_cast<long long>(v["calls"].get<int64_t>()), v["host_ms"].get<double>(), device);
    out += line;
  }
  return out;
}

}  // namespace lucid::util
