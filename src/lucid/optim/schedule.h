// Learning-rate and momentum schedule of the reference trainer: linear or cosine decay per epoch
// (lf), warmup over the first iterations (lr from 0, or warmup_bias_lr for biases; momentum from
// warmup_momentum; gradient accumulation ramping from 1 to round(nbs / batch), capped at the run's
// batch count). Warmup covers iterations 0 ... nw inclusive, so iteration nw and every later one use
// the targets exactly (the reference 8.4.190; 8.4.114 stopped at nw - 1 and kept those values).
#pragma once
#include <algorithm>
#include <cstdint>

#include "lucid/optim/optimizer.h"

namespace lucid::optim {

struct ScheduleOptions {
  int64_t epochs = 100;
  double lrf = 0.01;
  bool cos_lr = false;
  double warmup_epochs = 3.0;
  double warmup_momentum = 0.8;
  double warmup_bias_lr = 0.1;
  double momentum = 0.937;  // the target of the momentum warmup
  int64_t nbs = 64;
  int64_t batch = 16;
  bool timed = false;  // time= is set: the nominal accumulation is not capped at the run's batch count
};

// numpy.interp for two points, in the same arithmetic.
double interp2(double x, double x0, double x1, double y0, double y1);

class Schedule {
 public:
  Schedule(const ScheduleOptions& options, int64_t batches_per_epoch);

  double lf(int64_t epoch) const;
  int64_t warmup_iterations() const { return warmup_; }
  int64_t accumulate() const { return accumulate_; }
  // Whether the batches per optimizer step can still change at iteration ni or later: only warmup
  // ramps them, and only when nbs / batch rounds above 1.
  bool accumulation_fixed(int64_t ni) const;

  // Start of an epoch: every group's lr = initial_lr * lf(epoch).
  void begin_epoch(Optimizer& opt, int64_t epoch);
  // Before each batch (global iteration ni): warmup adjustments of lr, momentum and accumulation.
  void begin_batch(Optimizer& opt, int64_t epoch, int64_t ni);

  // time=: the schedule set up again for `epochs` (the decay's length and the warmup iterations;
  // the accumulation reached so far stays), as the reference's re-estimate does.
  void set_epochs(int64_t epochs, int64_t batches_per_epoch);

  // The accumulation in effect, saved in checkpoints (a function of the iteration alone: warmup sets
  // it per batch and leaves it at the nominal value); never above the capped nominal value.
  void restore(int64_t accumulate) { accumulate_ = std::min(accumulate, nominal_); }
  int64_t nominal_accumulate() const { return nominal_; }

 private:
  ScheduleOptions o_;
  int64_t warmup_;
  int64_t nominal_;
  int64_t accumulate_;
};

}  // namespace lucid::optim
