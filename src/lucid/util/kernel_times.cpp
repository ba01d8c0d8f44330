#include "lucid/util/kernel_times.h"

#include <ATen/record_function.h>
#include <c10/cuda/CUDAFunctions.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace lucid::util {

namespace prof = torch::profiler::impl;
namespace kineto = torch::autograd::profiler;

struct KernelClock::State {
  std::thread::id thread;
  bool stopped = false;
};

namespace {
std::atomic<KernelClock::State*> running{nullptr};
}  // namespace

bool KernelClock::running_here() {
  auto* s = running.load(std::memory_order_relaxed);
  return s && s->thread == std::this_thread::get_id();
}

KernelClock::KernelClock() : s_(std::make_unique<State>()) {
  s_->thread = std::this_thread::get_id();
  State* none = nullptr;
  if (!running.compare_exchange_strong(none, s_.get()))
    throw std::logic_error("kernel times: a KernelClock is already running");
  try {
    const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> activities{prof::ActivityType::CPU, prof::ActivityType::CUDA};
    kineto::prepareProfiler(config, activities);
    kineto::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    running.store(nullptr);
    throw std::runtime_error(std::string("kernel times: the profiler did not start: ") + e.what());
  }
}

KernelClock::~KernelClock() {
  if (!s_->stopped) {
    try {
      kineto::disableProfiler();
    } catch (...) {
    }
  }
  running.store(nullptr);
}

std::vector<std::string> enclosing_paths(std::vector<NamedInterval> ranges, const std::vector<uint64_t>& launches) {
  // Outer ranges first where two begin together.
  std::sort(ranges.begin(), ranges.end(), [](const NamedInterval& a, const NamedInterval& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<size_t> order(launches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return launches[a] < launches[b]; });
  std::vector<std::string> paths(launches.size());
  std::vector<const NamedInterval*> open;
  size_t next = 0;
  auto close_before = [&](uint64_t t) {
    while (!open.empty() && open.back()->end < t) open.pop_back();
  };
  for (size_t i : order) {
    const uint64_t t = launches[i];
    for (; next < ranges.size() && ranges[next].begin <= t; ++next) {
      close_before(ranges[next].begin);
      open.push_back(&ranges[next]);
    }
    close_before(t);
    std::string path;
    for (const auto* r : open) path += (path.empty() ? "" : "/") + r->name;
    paths[i] = std::move(path);
  }
  return paths;
}

nlohmann::ordered_json KernelClock::stop(int64_t steps, int64_t top) {
  if (s_->stopped) throw std::logic_error("kernel times: stop() called twice");
  c10::cuda::device_synchronize();
  s_->stopped = true;
  auto result = kineto::disableProfiler();
  running.store(nullptr);

  // Host operations by correlation id (the launch each device event links to) and the stage ranges.
  std::unordered_map<uint64_t, uint64_t> host_start;
  std::vector<NamedInterval> ranges;
  std::vector<const kineto::KinetoEvent*> device;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CUDA) {
      // Kernels, copies and fills; not the spans the profiler draws for stage scopes on the device.
      using T = libkineto::ActivityType;
      const auto type = e.activityType();
      if (type == static_cast<uint8_t>(T::CONCURRENT_KERNEL) || type == static_cast<uint8_t>(T::GPU_MEMCPY) ||
          type == static_cast<uint8_t>(T::GPU_MEMSET))
        device.push_back(&e);
      continue;
    }
    // Operators and stage scopes: the CUDA runtime's own events number their correlations apart.
    const auto type = e.activityType();
    if (type != static_cast<uint8_t>(libkineto::ActivityType::CPU_OP) &&
        type != static_cast<uint8_t>(libkineto::ActivityType::USER_ANNOTATION))
      continue;
    host_start[e.correlationId()] = e.startNs();
    if (e.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE))
      ranges.push_back({e.startNs(), e.endNs(), e.name()});
  }
  std::vector<uint64_t> launches;
  std::vector<bool> linked;
  for (const auto* e : device) {
    auto it = host_start.find(e->linkedCorrelationId());
    linked.push_back(it != host_start.end());
    launches.push_back(it != host_start.end() ? it->second : 0);
  }
  const auto paths = enclosing_paths(std::move(ranges), launches);

  struct Total {
    int64_t count = 0;
    double ms = 0;
  };
  std::vector<std::string> stage_order;
  std::map<std::string, Total> stages;
  std::map<std::pair<std::string, std::string>, Total> kernels;  // (name, stage)
  double total_ms = 0;
  for (size_t i = 0; i < device.size(); ++i) {
    const std::string stage = !linked[i]         ? "(launch not recorded)"
                              : paths[i].empty() ? "(outside any stage)"
                                                 : paths[i];
    const double ms = static_cast<double>(device[i]->durationNs()) / 1e6;
    if (!stages.count(stage)) stage_order.push_back(stage);
    auto& s = stages[stage];
    ++s.count, s.ms += ms;
    auto& k = kernels[{device[i]->name(), stage}];
    ++k.count, k.ms += ms;
    total_ms += ms;
  }
  const double per = static_cast<double>(std::max<int64_t>(steps, 1));
  nlohmann::ordered_json j;
  j["steps"] = steps;
  j["device_ms"] = total_ms;
  j["device_ms_per_step"] = total_ms / per;
  j["stages"] = nlohmann::ordered_json::array();
  for (const auto& name : stage_order) {
    const auto& s = stages[name];
    j["stages"].push_back({{"stage", name}, {"kernels", s.count}, {"device_ms", s.ms}, {"ms_per_step", s.ms / per}});
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Total>> ranked(kernels.begin(), kernels.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  if (static_cast<int64_t>(ranked.size()) > top) ranked.resize(static_cast<size_t>(std::max<int64_t>(top, 0)));
  j["kernels"] = nlohmann::ordered_json::array();
  for (const auto& [key, t] : ranked)
    j["kernels"].push_back({{"name", key.first}, {"stage", key.second}, {"calls", t.count}, {"device_ms", t.ms}});
  return j;
}

std::string KernelClock::table(const nlohmann::ordered_json& summary, size_t rows) {
  const double per = static_cast<double>(std::max<int64_t>(summary.value("steps", int64_t{1}), 1));
  char line[256];
  std::snprintf(line, sizeof line, "kernel times over %lld steps: %.2f ms of device work per step\n",
                static_cast<long long>(summary.value("steps", int64_t{0})), summary.value("device_ms_per_step", 0.0));
  std::string out = line;
  std::snprintf(line, sizeof line, "  %-48s %10s %12s %12s\n", "stage", "kernels", "device ms", "ms/step");
  out += line;
  for (const auto& s : summary["stages"]) {
    std::snprintf(line, sizeof line, "  %-48s %10lld %12.1f %12.3f\n", s["stage"].get<std::string>().c_str(),
                  static_cast<long long>(s["kernels"].get<int64_t>()), s["device_ms"].get<double>(),
                  s["ms_per_step"].get<double>());
    out += line;
  }
  out += "  costliest kernels (ms/step, calls, stage, kernel):\n";
  for (const auto& k : summary["kernels"]) {
    if (rows-- == 0) break;
    std::string name = k["name"].get<std::string>();
    if (name.size() > 110) name = name.substr(0, 107) + "...";
    std::snprintf(line, sizeof line, "  %8.3f %7lld  %-28s %s\n", k["device_ms"].get<double>() / per,
                  static_cast<long long>(k["calls"].get<int64_t>()), k["stage"].get<std::string>().c_str(),
                  name.c_str());
    out += line;
  }
  return out;
}

}  // namespace lucid::util
