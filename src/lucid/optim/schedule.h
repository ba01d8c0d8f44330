// Learning-rate and momentum schedule of the reference trainer: linear or cosine decay per epoch
// (lf), warmup over the first iterations (lr from 0, or warmup_bias_lr for biases; momentum from
// warmup_momentum; gradient accumulation ramping from 1 to nbs / batch).
#pragma once
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

  // The state that carries across iterations (momentum and accumulation keep their last warmup
  // values after warmup, as in the reference); saved in checkpoints.
  void restore(int64_t accumulate) { accumulate_ = accumulate; }

 private:
  ScheduleOptions o_;
  int64_t warmup_;
  int64_t accumulate_;
};

}  // namespace lucid::optim
