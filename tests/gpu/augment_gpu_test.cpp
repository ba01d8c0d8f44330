// Device HSV: the CUDA tensor form gives the same bytes as the CPU per-pixel form, without a host
// synchronisation; and a loader batch (pinned when CUDA is usable) goes through it on the device.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "sync_counter.h"

#include "lucid/data/hsv.h"
#include "lucid/data/loader.h"

using namespace lucid::data;
using torch::Tensor;

namespace {

using lucid::test_support::SyncCounter;

}  // namespace

TEST(HsvGpu, SameBytesAsCpuWithoutSync) {
  torch::manual_seed(0);
  for (int64_t w : {640, 100}) {
    auto imgs = torch::randint(0, 256, {3, 3, 48, w}, torch::kUInt8);
    auto gains = (torch::rand({3, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
    auto cpu = hsv_augment(imgs, gains);
    EXPECT_TRUE(torch::equal(cpu, hsv_augment_ops(imgs, gains))) << w;
    auto dev = imgs.to(torch::kCUDA);
    SyncCounter counter;
    Tensor out;
    {
      c10::WarningUtils::WarningHandlerGuard guard(&counter);
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
      out = hsv_augment(dev, gains);
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    }
    EXPECT_EQ(counter.count, 0) << w;
    EXPECT_TRUE(out.is_cuda());
    EXPECT_TRUE(torch::equal(out.cpu(), cpu)) << w;
  }
}

TEST(LoaderGpu, PinnedBatchThroughDeviceHsv) {
  auto source = [](int64_t i) {
    Sample s;
    s.image = torch::full({48, 64, 3}, int(40 + 20 * i), torch::kUInt8);
    s.orig_height = 48;
    s.orig_width = 64;
    s.instances.push_back(int32_t(i), {8, 8, 40, 8, 40, 30, 8, 30}, {8, 8, 40, 30});
    return s;
  };
  LoaderOptions o;
  o.dataset_size = 6;
  o.imgsz = 64;
  o.batch = 4;
  o.workers = 2;
  Loader loader(source, o);
  ASSERT_TRUE(loader.pinned());
  loader.start_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->images.is_pinned());
  EXPECT_TRUE(b->targets.masks.is_pinned());
  auto dev = b->images.to(torch::kCUDA, /*non_blocking=*/true);
  auto out = hsv_augment(dev, b->hsv_gains);
  EXPECT_TRUE(torch::equal(out.cpu(), hsv_augment(b->images, b->hsv_gains)));
}
