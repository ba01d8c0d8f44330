#include "lucid/optim/schedule.h"

#include <cmath>

namespace lucid::optim {

double interp2(double x, double x0, double x1, double y0, double y1) {
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  const double slope = (y1 - y0) / (x1 - x0);
  return slope * (x - x0) + y0;
}

namespace {
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }
}  // namespace

Schedule::Schedule(const ScheduleOptions& options, int64_t batches_per_epoch) : o_(options) {
  nominal_ = std::max<int64_t>(round_half_even(static_cast<double>(o_.nbs) / static_cast<double>(o_.batch)), 1);
  // Capped at the run's batch count, as the reference does unless time= re-estimates the epochs.
  if (!o_.timed)
    nominal_ = std::max<int64_t>(std::min(nominal_, batches_per_epoch * std::max<int64_t>(o_.epochs, 1)), 1);
  accumulate_ = nominal_;
  set_epochs(o_.epochs, batches_per_epoch);
}

void Schedule::set_epochs(int64_t epochs, int64_t batches_per_epoch) {
  o_.epochs = epochs;
  const double we = std::min(o_.warmup_epochs, static_cast<double>(std::max<int64_t>(o_.epochs - 1, 0)));
  warmup_ = we > 0 ? round_half_even(we * static_cast<double>(batches_per_epoch)) : 0;
}

bool Schedule::accumulation_fixed(int64_t ni) const { return warmup_ == 0 || ni > warmup_ || nominal_ <= 1; }

double Schedule::lf(int64_t epoch) const {
  const double e = static_cast<double>(epoch), n = static_cast<double>(o_.epochs);
  if (o_.cos_lr) return ((1 - std::cos(e * M_PI / n)) / 2) * (o_.lrf - 1) + 1;
  return std::max(1 - e / n, 0.0) * (1.0 - o_.lrf) + o_.lrf;
}

void Schedule::begin_epoch(Optimizer& opt, int64_t epoch) {
  for (size_t g = 0; g < opt.groups().size(); ++g) {
    const auto& grp = opt.groups()[g];
    opt.set_hyper(g, grp.initial_lr * lf(epoch), grp.current_momentum);
  }
}

void Schedule::begin_batch(Optimizer& opt, int64_t epoch, int64_t ni) {
  // Iteration nw itself is still warmup: it lands accumulation, lr and momentum on their targets.
  if (warmup_ == 0 || ni > warmup_) return;
  const double x = static_cast<double>(ni), nw = static_cast<double>(warmup_);
  accumulate_ = std::max<int64_t>(1, round_half_even(interp2(x, 0, nw, 1.0, static_cast<double>(nominal_))));
  for (size_t g = 0; g < opt.groups().size(); ++g) {
    const auto& grp = opt.groups()[g];
    const double lr = interp2(x, 0, nw, grp.is_bias ? o_.warmup_bias_lr : 0.0, grp.initial_lr * lf(epoch));
    // Adam-family beta1 is not warmed, as in the reference (its groups carry no momentum key).
    const double m = uses_betas(opt.kind()) ? grp.current_momentum : interp2(x, 0, nw, o_.warmup_momentum, o_.momentum);
    opt.set_hyper(g, lr, m);
  }
}

}  // namespace lucid::optim
