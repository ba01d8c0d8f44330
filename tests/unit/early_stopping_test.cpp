// Best selection and early stopping (train/early_stopping.h) as a table: fitness per epoch in,
// (best written, stop) per epoch out. The same rules against the reference's own code are in
// tests/oracle/test_early_stopping_oracle.py.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "lucid/train/early_stopping.h"

namespace {

using lucid::engine::judge_epoch;
using lucid::engine::LoopState;

struct Case {
  const char* name;
  int64_t patience;
  std::vector<std::optional<double>> fitness;  // nullopt: not validated
  std::vector<int> best;                       // 1: weights/best written in that epoch
  int64_t stopped_after;                       // epochs trained (the last if it never stops)
  int64_t best_epoch;
};

TEST(EarlyStopping, TheReferencesRulesAsATable) {
  const auto none = std::nullopt;
  const std::vector<Case> cases = {
      {"no validation: best is last, no stop", 2, {none, none, none, none, 0.3}, {1, 1, 1, 1, 1}, 5, 5},
      {"fitness 0 counts as not measured", 1, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {1, 1, 1, 1, 1, 1}, 6, 6},
      {"patience 2 after a peak", 2, {0.1, 0.3, 0.2, 0.2, 0.25}, {1, 1, 0, 0}, 4, 2},
      {"a tie rewrites best but does not restart the count", 2, {0.2, 0.2, 0.1}, {1, 1, 0}, 3, 2},
      {"zeros, then a rise", 1, {0.0, 0.0, 0.1, 0.05}, {1, 1, 1, 0}, 4, 3},
      {"patience 0 never stops", 0, {0.5, 0.4, 0.3, 0.2}, {1, 0, 0, 0}, 4, 1},
  };
  for (const auto& c : cases) {
    LoopState state;
    int64_t trained = 0;
    for (size_t e = 0; e < c.fitness.size(); ++e) {
      state.epoch = static_cast<int64_t>(e) + 1;
      // A resume between epochs continues from a copy of the state, deciding the same.
      LoopState resumed = state;
      const auto v = judge_epoch(resumed, c.fitness[e], c.patience);
      const auto w = judge_epoch(state, c.fitness[e], c.patience);
      EXPECT_EQ(v.best, w.best);
      ASSERT_LT(e, c.best.size()) << c.name;
      EXPECT_EQ(w.best, c.best[e] == 1) << c.name << " epoch " << e + 1;
      trained = state.epoch;
      if (w.stop) {
        EXPECT_TRUE(lucid::engine::early_stop_due(state, c.patience)) << c.name;
        break;
      }
    }
    EXPECT_EQ(trained, c.stopped_after) << c.name;
    EXPECT_EQ(state.best_epoch, c.best_epoch) << c.name;
  }
  // A run without validation so far is never one that stopped early, whatever its epoch count.
  LoopState unvalidated;
  unvalidated.epoch = 150;
  unvalidated.epochs_without_improvement = 150;
  EXPECT_FALSE(lucid::engine::early_stop_due(unvalidated, 100));
  EXPECT_TRUE(lucid::engine::validation_due(false, true, false));
  EXPECT_FALSE(lucid::engine::validation_due(false, false, false));
}

}  // namespace
