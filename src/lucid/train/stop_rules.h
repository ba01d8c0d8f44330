// Whether a fit ends after an epoch: one pure decision with a named reason (as replay/route.h's
// route()), from the epoch's facts. The reasons, in the order they are named when several hold:
//   final_epoch  the epoch was the last of `epochs`
//   patience     early stopping: no improvement in the last `patience` epochs (judge_epoch's verdict)
//   time_up      time= ran out, during the epoch's steps or by its end
//   time_budget  time=: the epoch is at or past the count re-estimated from the mean epoch time
// With time= the decision also carries the epoch count the run goes on with (or, stopping, the
// epochs it trained, so that its checkpoint is a finished run).
#pragma once
#include <cstdint>

#include "lucid/train/time_budget.h"

namespace lucid::engine {

enum class StopReason { None, FinalEpoch, Patience, TimeUp, TimeBudget };
const char* stop_reason_name(StopReason reason);

struct StopFacts {
  int64_t epoch = 0;           // 0-based, just trained
  int64_t epochs = 0;          // the fit's epoch count so far
  bool patience_stop = false;  // judge_epoch's verdict
  bool time_up = false;        // time= ran out after an optimizer step of the epoch
  int64_t start_epoch = 0;     // the first epoch this process trained (time= averages over them)
  double elapsed = 0;          // seconds since this process's fit began
};

struct StopDecision {
  StopReason reason = StopReason::None;
  int64_t epochs = 0;  // the epoch count from here on
  bool stop() const { return reason != StopReason::None; }
};

StopDecision decide_stop(const StopFacts& facts, const TimeBudget& budget);

}  // namespace lucid::engine
