// The attribution of kernel_times= (util/kernel_times.h): a launch is charged to the ranges open at
// its host start time, outermost first; ranges that begin together nest longest outside, a range
// covers its end instant, and a launch outside every range gets the empty path.
#include <gtest/gtest.h>

#include "lucid/util/kernel_times.h"

using lucid::util::enclosing_paths;
using lucid::util::NamedInterval;

TEST(KernelTimes, LaunchesAreChargedToTheRangesOpenAtTheirStart) {
  // step [10, 100] > loss [20, 60] > assign [20, 30], mask [40, 60]; backward [70, 90]; data [120, 130]
  // given out of order.
  std::vector<NamedInterval> ranges{{40, 60, "mask"},   {10, 100, "step"},    {120, 130, "data"},
                                    {20, 30, "assign"}, {70, 90, "backward"}, {20, 60, "loss"}};
  std::vector<uint64_t> launches{25, 5, 45, 60, 65, 30, 31, 95, 125, 200, 10, 20};
  const auto paths = enclosing_paths(ranges, launches);
  const std::vector<std::string> expected{"step/loss/assign",
                                          "",
                                          "step/loss/mask",
                                          "step/loss/mask",
                                          "step",
                                          "step/loss/assign",
                                          "step/loss",
                                          "step",
                                          "data",
                                          "",
                                          "step",
                                          "step/loss/assign"};
  EXPECT_EQ(paths, expected);
}

TEST(KernelTimes, NoRangesLeaveEveryLaunchOutside) {
  EXPECT_EQ(enclosing_paths({}, {1, 2}), (std::vector<std::string>{"", ""}));
  EXPECT_TRUE(enclosing_paths({{1, 2, "a"}}, {}).empty());
}

TEST(KernelTimes, TableListsItsRowsCostliestKernelsOfTheSummary) {
  nlohmann::ordered_json summary{{"steps", 2}, {"device_ms", 6.0}, {"device_ms_per_step", 3.0}};
  summary["stages"] =
      nlohmann::ordered_json::array({{{"stage", "step"}, {"kernels", 3}, {"device_ms", 6.0}, {"ms_per_step", 3.0}}});
  summary["kernels"] = nlohmann::ordered_json::array();
  for (const auto& [name, ms] : std::vector<std::pair<std::string, double>>{{"gemm", 3.0}, {"add", 2.0}, {"fill", 1.0}})
    summary["kernels"].push_back({{"name", name}, {"stage", "step"}, {"calls", 2}, {"device_ms", ms}});
  const auto two = lucid::util::KernelClock::table(summary, 2);
  EXPECT_NE(two.find("gemm"), std::string::npos) << two;
  EXPECT_NE(two.find("add"), std::string::npos) << two;
  EXPECT_EQ(two.find("fill"), std::string::npos) << two;
  EXPECT_NE(two.find("   1.500       2  step"), std::string::npos) << two;  // 3 ms over 2 steps
  EXPECT_NE(lucid::util::KernelClock::table(summary).find("fill"), std::string::npos);
}
