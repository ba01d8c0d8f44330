#include "lucid/train/time_budget.h"

#include <algorithm>
#include <cmath>

namespace lucid::engine {

int64_t TimeBudget::reestimate(int64_t epoch, int64_t start_epoch, double elapsed) const {
  const double mean = elapsed / static_cast<double>(epoch - start_epoch + 1);
  // Bounded as the epochs option is (a clock that did not advance would give infinity).
  const double n = mean > 0 ? std::ceil(seconds_ / mean) : kMaxEpochs;
  return static_cast<int64_t>(std::min(n, static_cast<double>(kMaxEpochs)));
}

TimeBudget::EpochEnd TimeBudget::end_epoch(int64_t epoch, int64_t start_epoch, int64_t epochs, double elapsed,
                                           bool stop) const {
  if (!active()) return {epochs, stop};
  stop = stop || time_up(elapsed);
  const int64_t n = reestimate(epoch, start_epoch, elapsed);
  return {n, stop || epoch >= n};
}

}  // namespace lucid::engine
