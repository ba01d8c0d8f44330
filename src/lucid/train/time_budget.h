// time=HOURS: the reference trainer's timed training (8.4.190 BaseTrainer._do_train). The fit
// starts with its epochs option; after every epoch the epochs are re-estimated from the mean epoch
// time of this process so far, epochs = ceil(time * 3600 / mean), and the learning-rate schedule
// and warmup are set up again for that count (stretched or shrunk); the fit stops after an
// optimizer step or an epoch once the time is up, or when the epoch just finished is at or past
// the new count. What depends on the wall clock is only these decisions: given the same
// decisions, every byte is as without time.
#pragma once
#include <cstdint>

namespace lucid::engine {

class TimeBudget {
 public:
  static constexpr int64_t kMaxEpochs = 1000000;  // the epochs option's bound
  explicit TimeBudget(double hours) : seconds_(hours * 3600.0) {}
  bool active() const { return seconds_ > 0; }

  // After an optimizer step, `elapsed` seconds into this process's fit: whether to stop now
  // (the rest of the epoch is not trained).
  bool time_up(double elapsed) const { return active() && elapsed > seconds_; }

  // After epoch `epoch` (0-based) of a fit that began at `start_epoch` in this process, `elapsed`
  // seconds after it began: the new epoch count (at most kMaxEpochs).
  int64_t reestimate(int64_t epoch, int64_t start_epoch, double elapsed) const;

  struct EpochEnd {
    int64_t epochs;  // the count the schedule is set up for from here
    bool stop;
  };
  // The whole end-of-epoch rule: `stop` already decided (final epoch of `epochs`, early stopping,
  // time up during the epoch); then time up at its end, then the re-estimate.
  EpochEnd end_epoch(int64_t epoch, int64_t start_epoch, int64_t epochs, double elapsed, bool stop) const;

 private:
  double seconds_;
};

}  // namespace lucid::engine
