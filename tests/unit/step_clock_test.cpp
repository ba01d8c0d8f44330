// util::StepClock on the host's clock: one interval per step, none across epochs, the steady figure
// over the epochs after the first (or the first where it is alone), an epoch without steps left out.
#include <gtest/gtest.h>

#include "lucid/util/step_clock.h"

using namespace lucid;

TEST(StepClock, OneIntervalPerStepAndTheSteadyEpochsAfterTheFirst) {
  util::StepClock clock(/*cuda=*/false);
  clock.begin_epoch();
  for (int i = 0; i < 3; ++i) clock.step();
  clock.end_epoch();
  auto first = clock.summary();
  EXPECT_EQ(first["clock"], "host");
  EXPECT_EQ(first["steady"]["steps"], 3);
  EXPECT_FALSE(first["steady"]["after_first_epoch"].get<bool>());

  clock.begin_epoch();
  clock.end_epoch();  // an epoch without steps (time= ran out) has no figure
  for (int e = 0; e < 2; ++e) {
    clock.begin_epoch();
    for (int i = 0; i < 2; ++i) clock.step();
    clock.end_epoch();
  }
  const auto j = clock.summary();
  ASSERT_EQ(j["epochs"].size(), 3u);
  EXPECT_EQ(j["epochs"][0]["steps"], 3);
  EXPECT_EQ(j["epochs"][1]["steps"], 2);
  EXPECT_EQ(j["epochs"][2]["steps"], 2);
  const auto& s = j["steady"];
  EXPECT_EQ(s["steps"], 4);
  EXPECT_TRUE(s["after_first_epoch"].get<bool>());
  EXPECT_LE(0.0, s["min_ms"].get<double>());
  EXPECT_LE(s["min_ms"].get<double>(), s["median_ms"].get<double>());
  EXPECT_LE(s["median_ms"].get<double>(), s["max_ms"].get<double>());
  EXPECT_NE(util::StepClock::line(j).find("over 4 steps of the epochs after the first (on the host)"),
            std::string::npos);
}
