// The training steps' pace, for the steady step that benchmarks set beside the network's floor. As
// each step begins (its batch fetched, nothing of it queued yet) a mark is made: on CUDA an event on
// the compute stream, whose distance to the next mark is the time the device took for the step and
// for the next batch's fetch, its work and any idle time alike; on the CPU the host's clock. The epoch's end is a last
// mark, and no interval spans two epochs (validation lies between). Events are read at the epoch's end, after the fit
// has waited for its last step, so the steps are never synchronised.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace lucid::util {

class StepClock {
 public:
  explicit StepClock(bool cuda);
  ~StepClock();
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;

  void begin_epoch();
  void step();  // a step begins
  void end_epoch();

  // {"clock": "device" | "host", "epochs": [figures per epoch], "steady": figures and
  // "after_first_epoch"}, figures being {"steps", "median_ms", "min_ms", "max_ms", "mean_ms"}: steady
  // is over the epochs after this run's first (its first uses and recordings), or over the first
  // where it is the only one.
  nlohmann::ordered_json summary() const;
  // "step time: median X ms (min-max), mean Y ms, over N steps of the epochs after the first (on
  // the device)".
  static std::string line(const nlohmann::ordered_json& summary);

 private:
  struct Marks;
  bool cuda_;
  std::unique_ptr<Marks> marks_;
  std::vector<std::vector<double>> epochs_ms_;  // each finished epoch's step times
};

}  // namespace lucid::util
