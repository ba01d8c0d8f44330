#include "lucid/util/loader_wait.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdio>

namespace lucid::util {

struct LoaderWaitClock::Events {
  std::vector<std::pair<at::cuda::CUDAEvent, at::cuda::CUDAEvent>> pairs;
  bool open = false;
};

LoaderWaitClock::LoaderWaitClock(bool cuda) : cuda_(cuda), pending_(std::make_unique<Events>()) {}

LoaderWaitClock::~LoaderWaitClock() = default;

void LoaderWaitClock::begin_epoch() { epoch_started_ = Clock::now(); }

void LoaderWaitClock::end_epoch() { epochs_s_ += std::chrono::duration<double>(Clock::now() - epoch_started_).count(); }

void LoaderWaitClock::before_fetch() {
  started_ = Clock::now();
  if (!cuda_) return;
  auto& pair =
      pending_->pairs.emplace_back(at::cuda::CUDAEvent(cudaEventDefault), at::cuda::CUDAEvent(cudaEventDefault));
  pair.first.record(c10::cuda::getCurrentCUDAStream());
  pending_->open = true;
}

void LoaderWaitClock::after_fetch() {
  const double s = std::chrono::duration<double>(Clock::now() - started_).count();
  host_s_ += s;
  host_max_s_ = std::max(host_max_s_, s);
  ++steps_;
  if (!cuda_) return;
  pending_->pairs.back().second.record(c10::cuda::getCurrentCUDAStream());
  pending_->open = false;
}

void LoaderWaitClock::abandon_fetch() {
  if (cuda_ && pending_->open) pending_->pairs.pop_back();
  pending_->open = false;
}

nlohmann::ordered_json LoaderWaitClock::summary() {
  for (auto& [before, after] : pending_->pairs) {
    after.synchronize();
    const double s = static_cast<double>(before.elapsed_time(after)) / 1000.0;
    device_s_ += s;
    device_max_s_ = std::max(device_max_s_, s);
  }
  pending_->pairs.clear();
  const double per = steps_ > 0 ? 1000.0 / static_cast<double>(steps_) : 0.0;
  nlohmann::ordered_json j;
  j["steps"] = steps_;
  j["epochs_s"] = epochs_s_;
  j["host_s"] = host_s_;
  j["host_ms_per_step"] = host_s_ * per;
  j["host_max_ms"] = host_max_s_ * 1000.0;
  if (cuda_) {
    j["device_idle_s"] = device_s_;
    j["device_idle_ms_per_step"] = device_s_ * per;
    j["device_idle_max_ms"] = device_max_s_ * 1000.0;
  }
  j["share"] = epochs_s_ > 0 ? (cuda_ ? device_s_ : host_s_) / epochs_s_ : 0.0;
  return j;
}

std::string LoaderWaitClock::line(const nlohmann::ordered_json& j) {
  // On CUDA what counts is the device's idle time; on the CPU the step waits as long as the host.
  const bool device = j.contains("device_idle_s");
  const double total = device ? j["device_idle_s"].get<double>() : j["host_s"].get<double>();
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "loader wait: %.3f s %s over %lld steps (%.2f ms per step, at most %.1f ms; %.1f%% of the epochs' %.1f s)", total,
      device ? "of device idle time" : "on the host", static_cast<long long>(j["steps"].get<int64_t>()),
      device ? j["device_idle_ms_per_step"].get<double>() : j["host_ms_per_step"].get<double>(),
      device ? j["device_idle_max_ms"].get<double>() : j["host_max_ms"].get<double>(), 100.0 * j["share"].get<double>(),
      j["epochs_s"].get<double>());
  return buf;
}

}  // namespace lucid::util
