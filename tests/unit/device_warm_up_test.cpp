// The device warm-up before a fit (train/device_warm_up.h) on the CPU: the batch sizes of an epoch,
// and nothing done off CUDA.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "lucid/config/model_yaml.h"
#include "lucid/train/device_warm_up.h"

using namespace lucid;

TEST(DeviceWarmUp, TheEpochsBatchSizesAreTheBatchAndThePartialLastBatch) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(engine::epoch_batch_sizes(512, 4), V{4});
  EXPECT_EQ(engine::epoch_batch_sizes(20000, 64), (V{64, 32}));
  EXPECT_EQ(engine::epoch_batch_sizes(3, 16), V{3});  // one batch, smaller than asked
  EXPECT_EQ(engine::epoch_batch_sizes(17, 16), (V{16, 1}));
  EXPECT_EQ(engine::epoch_batch_sizes(0, 16), V{});
}

TEST(DeviceWarmUp, OffCudaItDoesNothing) {
  engine::WarmUpRequest r;
  r.spec = config::load_model_spec("yolo26n-seg.yaml", 3);
  r.batches = {2};
  r.imgsz = 64;
  torch::manual_seed(3);
  const auto before = at::detail::getDefaultCPUGenerator().get_state();
  EXPECT_EQ(engine::warm_up_device(r), 0.0);
  EXPECT_TRUE(torch::equal(before, at::detail::getDefaultCPUGenerator().get_state()));
}
