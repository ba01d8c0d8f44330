// The device warm-up before a fit (train/device_warm_up.h) on the GPU: it leaves the CPU generator
// and the device's memory as it found them.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "lucid/config/model_yaml.h"
#include "lucid/train/device_warm_up.h"

using namespace lucid;

namespace {

int64_t reserved_bytes() {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
      .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

TEST(DeviceWarmUpGpu, LeavesTheGeneratorAndTheDeviceMemoryAsItFoundThem) {
  engine::WarmUpRequest r;
  r.spec = config::load_model_spec("yolo26n-seg.yaml", 3);
  r.device = torch::Device(torch::kCUDA, 0);
  r.batches = engine::epoch_batch_sizes(5, 2);  // 2, and the partial batch of 1
  ASSERT_EQ(r.batches, (std::vector<int64_t>{2, 1}));
  r.imgsz = 128;
  r.autocast = true;
  torch::manual_seed(3);
  const auto before = at::detail::getDefaultCPUGenerator().get_state();
  EXPECT_GT(engine::warm_up_device(r), 0.0);
  EXPECT_TRUE(torch::equal(before, at::detail::getDefaultCPUGenerator().get_state()));
  // The first warm-up of a process leaves what the process keeps for its life (cuBLAS's workspace
  // of the stream, which a fit makes anyway); a second one leaves nothing more.
  const int64_t reserved = reserved_bytes();
  EXPECT_GT(engine::warm_up_device(r), 0.0);
  EXPECT_EQ(reserved_bytes(), reserved);
}

}  // namespace
