#include "lucid/train/stop_rules.h"

namespace lucid::engine {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::None:
      return "none";
    case StopReason::FinalEpoch:
      return "final_epoch";
    case StopReason::Patience:
      return "patience";
    case StopReason::TimeUp:
      return "time_up";
    case StopReason::TimeBudget:
      return "time_budget";
  }
  return "none";
}

StopDecision decide_stop(const StopFacts& f, const TimeBudget& budget) {
  const bool final_epoch = f.epoch + 1 >= f.epochs;
  StopDecision d{StopReason::None, f.epochs};
  if (final_epoch)
    d.reason = StopReason::FinalEpoch;
  else if (f.patience_stop)
    d.reason = StopReason::Patience;
  else if (f.time_up)
    d.reason = StopReason::TimeUp;
  if (!budget.active()) return d;
  const auto end = budget.end_epoch(f.epoch, f.start_epoch, f.epochs, f.elapsed, d.stop());
  if (end.stop && !d.stop()) d.reason = budget.time_up(f.elapsed) ? StopReason::TimeUp : StopReason::TimeBudget;
  // A stopped fit records the epochs it trained, so that its checkpoint is a finished run.
  d.epochs = end.stop ? f.epoch + 1 : end.epochs;
  return d;
}

}  // namespace lucid::engine
