// The fit loop's hooks (train/fit_hooks.h): their order, which pins the order of the epoch's
// writes, and the stop rules as a table of facts in, a named reason out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lucid/train/fit_events.h"
#include "lucid/train/fit_hooks.h"
#include "lucid/train/stop_rules.h"

namespace {

using namespace lucid::engine;

std::vector<std::string> names_of(const FitHooks& hooks) {
  std::vector<std::string> names;
  for (const auto& h : hooks) names.emplace_back(h->name());
  return names;
}

class NoObserver : public FitObserver {
 public:
  void on_event(const FitEvent&) override {}
  bool stop_requested() override { return false; }
};

TEST(FitHooks, OrderOfEveryHookAndSoOfTheEpochsWrites) {
  NoObserver observer;
  HookPlan plan;
  plan.data_parallel = true;
  plan.batch_plots = true;
  plan.observer = &observer;
  // results.csv and step_losses.f32, then best and epochN, fit_report.json, and weights/last last
  // (it commits the epoch); the observer's on_model_save / on_fit_epoch_end after it.
  const std::vector<std::string> all = {"progress",    "batch_plots",  "data_parallel", "validation",      "stop_rules",
                                        "results_log", "checkpointer", "fit_report",    "last_checkpoint", "callbacks"};
  EXPECT_EQ(names_of(build_hooks(plan)), all);
  const std::vector<std::string> plain = {"progress",     "validation", "stop_rules",     "results_log",
                                          "checkpointer", "fit_report", "last_checkpoint"};
  EXPECT_EQ(names_of(build_hooks(HookPlan{})), plain);
}

struct StopCase {
  const char* what;
  StopFacts facts;
  double hours;  // time=; 0: off
  StopReason reason;
  int64_t epochs;  // the count the run goes on with (or, stopping under time=, the epochs trained)
};

TEST(StopRules, ReasonsAsATable) {
  const std::vector<StopCase> cases = {
      {"mid-fit, nothing holds", {2, 10, false, false, 0, 30.0}, 0, StopReason::None, 10},
      {"the last epoch", {9, 10, false, false, 0, 30.0}, 0, StopReason::FinalEpoch, 10},
      {"the last epoch also without improvement", {9, 10, true, false, 0, 30.0}, 0, StopReason::FinalEpoch, 10},
      {"no improvement in the last patience epochs", {4, 10, true, false, 0, 30.0}, 0, StopReason::Patience, 10},
      {"patience named before a timed-out epoch", {4, 10, true, true, 0, 30.0}, 1, StopReason::Patience, 5},
      {"time up during the epoch's steps", {1, 10, false, true, 0, 3601.0}, 1, StopReason::TimeUp, 2},
      {"time up by the epoch's end", {1, 10, false, false, 0, 3601.0}, 1, StopReason::TimeUp, 2},
      // Resumed at epoch 3: two epochs of 950 s; an hour holds ceil(3.79) = 4, and epoch index 4 is past it.
      {"time=: the re-estimated count reached", {4, 10, false, false, 3, 1900.0}, 1, StopReason::TimeBudget, 5},
      {"time=: the count re-estimated upwards", {1, 10, false, false, 0, 200.0}, 1, StopReason::None, 36},
      {"time=: a resumed fit averages its own epochs", {4, 10, false, false, 3, 400.0}, 1, StopReason::None, 18},
  };
  for (const auto& c : cases) {
    const auto d = decide_stop(c.facts, TimeBudget(c.hours));
    EXPECT_EQ(stop_reason_name(d.reason), std::string(stop_reason_name(c.reason))) << c.what;
    EXPECT_EQ(d.stop(), c.reason != StopReason::None) << c.what;
    EXPECT_EQ(d.epochs, c.epochs) << c.what;
  }
}

}  // namespace
