// How long the training step waited for the data loader. Around each fetch of a batch it records
//   host   the time the training thread spent inside the fetch;
//   device (CUDA) the time the device sat idle because of it: an event recorded before the fetch
//          completes when the work queued so far is done, one recorded after completes at once if the
//          device is idle by then, so their distance is the starvation (zero while the device is still
//          busy with earlier steps). The events are read only when a summary is asked for (after the
//          epoch), so measuring adds no host synchronisation to the steps.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace lucid::util {

class LoaderWaitClock {
 public:
  explicit LoaderWaitClock(bool cuda);
  ~LoaderWaitClock();
  LoaderWaitClock(const LoaderWaitClock&) = delete;
  LoaderWaitClock& operator=(const LoaderWaitClock&) = delete;

  // The training epochs' own time (their batch loops), which the wait is a share of.
  void begin_epoch();
  void end_epoch();
  void before_fetch();
  void after_fetch();  // the fetch that returned a batch; a fetch that ended the epoch is not a step's wait
  void abandon_fetch();

  // {"steps", "epochs_s", "host_s", "host_ms_per_step", "host_max_ms", ["device_idle_s",
  // "device_idle_ms_per_step", "device_idle_max_ms"], "share"}: totals over every fetch so far; share is
  // the wait that counts (the device's idle time on CUDA, else the host's) over epochs_s. Waits for
  // the device's recorded events.
  nlohmann::ordered_json summary();
  // One line for the log: "loader wait: ... over N steps (P% of the epochs' T s)".
  static std::string line(const nlohmann::ordered_json& summary);

 private:
  struct Events;
  using Clock = std::chrono::steady_clock;
  bool cuda_;
  Clock::time_point started_{}, epoch_started_{};
  double epochs_s_ = 0;
  int64_t steps_ = 0;
  double host_s_ = 0, host_max_s_ = 0;
  double device_s_ = 0, device_max_s_ = 0;
  std::unique_ptr<Events> pending_;  // event pairs not yet read
};

}  // namespace lucid::util
