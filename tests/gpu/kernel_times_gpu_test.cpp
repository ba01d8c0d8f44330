// kernel_times= on CUDA (util/kernel_times.h): the profiler sees the kernels, charges each to the
// stage ranges open when its host operation began (nested ranges as a path, the backward's kernels,
// launched on the autograd engine's thread, to the range the fit thread holds around it), counts
// what ran outside every range apart, and the table names the stages.
#include <gtest/gtest.h>

#include <map>

#include "lucid/util/kernel_times.h"
#include "lucid/util/trace.h"

using namespace lucid;

TEST(KernelTimesGpu, KernelsAreChargedToTheirStages) {
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  auto x = torch::rand({512, 512}, f);
  auto w = torch::rand({512, 512}, f).requires_grad_();
  torch::cuda::synchronize();
  util::KernelClock clock;
  EXPECT_TRUE(util::KernelClock::running_here());
  {
    util::TraceRange outer("outer");
    auto y = x.matmul(x);
    {
      util::TraceRange inner("inner");
      y = (y + 1).sum();
    }
  }
  auto z = x * 2;
  {
    util::TraceRange range("backward");
    (w.matmul(x)).sum().backward();
  }
  const auto j = clock.stop(2, 100);
  EXPECT_FALSE(util::KernelClock::running_here());
  std::map<std::string, int64_t> kernels;
  for (const auto& s : j["stages"]) kernels[s["stage"].get<std::string>()] = s["kernels"].get<int64_t>();
  EXPECT_GE(kernels["outer"], 1) << j.dump(1);                // the matmul
  EXPECT_GE(kernels["outer/inner"], 2) << j.dump(1);          // add, sum
  EXPECT_GE(kernels["backward"], 2) << j.dump(1);             // the forward matmul and sum, and their gradients
  EXPECT_GE(kernels["(outside any stage)"], 1) << j.dump(1);  // x * 2
  EXPECT_EQ(kernels.count("(launch not recorded)"), 0u) << j.dump(1);
  EXPECT_GT(j["device_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["steps"].get<int64_t>(), 2);
  EXPECT_NEAR(j["device_ms_per_step"].get<double>(), j["device_ms"].get<double>() / 2, 1e-9);
  const auto table = util::KernelClock::table(j);
  EXPECT_NE(table.find("outer/inner"), std::string::npos) << table;
  EXPECT_NE(table.find("kernel times over 2 steps"), std::string::npos) << table;
}

TEST(KernelTimesGpu, OneClockAtATime) {
  util::KernelClock clock;
  EXPECT_THROW(util::KernelClock(), std::logic_error);
  clock.stop(1);
  EXPECT_THROW(clock.stop(1), std::logic_error);
}
