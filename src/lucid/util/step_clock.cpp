#include "lucid/util/step_clock.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <cstdio>
#include <numeric>

#include "lucid/util/stats.h"

namespace lucid::util {

struct StepClock::Marks {
  std::vector<at::cuda::CUDAEvent> events;  // reused from epoch to epoch
  std::vector<std::chrono::steady_clock::time_point> times;
  size_t used = 0;
};

StepClock::StepClock(bool cuda) : cuda_(cuda), marks_(std::make_unique<Marks>()) {}

StepClock::~StepClock() = default;

void StepClock::begin_epoch() { marks_->used = 0; }

void StepClock::step() {
  auto& m = *marks_;
  if (cuda_) {
    if (m.used == m.events.size()) m.events.emplace_back(cudaEventDefault);
    m.events[m.used].record(c10::cuda::getCurrentCUDAStream());
  } else {
    if (m.used == m.times.size()) m.times.emplace_back();
    m.times[m.used] = std::chrono::steady_clock::now();
  }
  ++m.used;
}

void StepClock::end_epoch() {
  auto& m = *marks_;
  const size_t steps = m.used;
  if (steps == 0) return;
  step();  // the epoch's end
  std::vector<double> ms;
  if (cuda_) {
    m.events[steps].synchronize();
    for (size_t i = 0; i < steps; ++i) ms.push_back(m.events[i].elapsed_time(m.events[i + 1]));
  } else {
    for (size_t i = 0; i < steps; ++i)
      ms.push_back(std::chrono::duration<double, std::milli>(m.times[i + 1] - m.times[i]).count());
  }
  epochs_ms_.push_back(std::move(ms));
  m.used = 0;
}

namespace {

nlohmann::ordered_json describe(const std::vector<double>& ms) {
  const auto s = spread(ms);
  const double mean = ms.empty() ? 0.0 : std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  return {{"steps", ms.size()}, {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"mean_ms", mean}};
}

}  // namespace

nlohmann::ordered_json StepClock::summary() const {
  nlohmann::ordered_json j;
  j["clock"] = cuda_ ? "device" : "host";
  j["epochs"] = nlohmann::ordered_json::array();
  for (const auto& e : epochs_ms_) j["epochs"].push_back(describe(e));
  std::vector<double> steady;
  for (size_t e = epochs_ms_.size() > 1 ? 1 : 0; e < epochs_ms_.size(); ++e)
    steady.insert(steady.end(), epochs_ms_[e].begin(), epochs_ms_[e].end());
  j["steady"] = describe(steady);
  j["steady"]["after_first_epoch"] = epochs_ms_.size() > 1;
  return j;
}

std::string StepClock::line(const nlohmann::ordered_json& j) {
  const auto& s = j["steady"];
  char buf[256];
  std::snprintf(buf, sizeof buf, "step time: median %.2f ms (%.2f-%.2f), mean %.2f ms, over %lld steps of %s (%s)",
                s["median_ms"].get<double>(), s["min_ms"].get<double>(), s["max_ms"].get<double>(),
                s["mean_ms"].get<double>(), static_cast<long long>(s["steps"].get<int64_t>()),
                s["after_first_epoch"].get<bool>() ? "the epochs after the first" : "the first epoch",
                j["clock"].get<std::string>() == "device" ? "on the device" : "on the host");
  return buf;
}

}  // namespace lucid::util
