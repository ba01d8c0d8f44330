// Device HSV and device pixels: the CUDA tensor forms give the same bytes as the CPU forms, without a
// host synchronisation; loader batches (pinned when CUDA is usable) go through them on the device.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "pixel_cases.h"
#include "sync_counter.h"

#include "lucid/data/device_augment.h"
#include "lucid/data/hsv.h"
#include "lucid/data/loader.h"
#include "lucid/data/network_input.h"

using namespace lucid::data;
using torch::Tensor;

namespace {

using lucid::test_support::count_syncs;
using lucid::test_support::PixelCase;

// Prepared images at training size (long side 640, landscape, portrait and square) of random bytes,
// each with one polygon instance.
SampleSource training_size_source() {
  torch::manual_seed(1);
  auto samples = std::make_shared<std::vector<Sample>>();
  const int sizes[][2] = {{480, 640}, {640, 480}, {640, 640}, {427, 640}, {640, 512}, {360, 640}};
  for (const auto& hw : sizes) {
    Sample s;
    s.image = torch::randint(0, 256, {hw[0], hw[1], 3}, torch::kUInt8);
    s.orig_height = hw[0];
    s.orig_width = hw[1];
    s.instances.push_back(1, {100, 100, 300, 120, 250, 300, 90, 280}, {90, 100, 300, 300});
    samples->push_back(std::move(s));
  }
  return [samples](int64_t i) { return samples->at(size_t(i)); };
}

}  // namespace

TEST(HsvGpu, SameBytesAsCpuWithoutSync) {
  torch::manual_seed(0);
  for (int64_t w : {640, 100}) {
    auto imgs = torch::randint(0, 256, {3, 3, 48, w}, torch::kUInt8);
    auto gains = (torch::rand({3, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
    auto cpu = hsv_augment(imgs, gains);
    EXPECT_TRUE(torch::equal(cpu, hsv_augment_ops(imgs, gains))) << w;
    auto dev = imgs.to(torch::kCUDA);
    Tensor out;
    EXPECT_EQ(count_syncs([&] { out = hsv_augment(dev, gains); }), 0) << w;
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

// render_batch on CUDA equals the CPU path's images (augment_sample) byte for byte, without a host
// synchronisation: at 640 with the default mosaic and affine map, with rotation, shear and
// perspective, and without mosaic at a width with OpenCV's scalar row tail (600 = 37 * 16 + 8).
TEST(DeviceAugmentGpu, SameBytesAsCpuWithoutSync) {
  const auto source = training_size_source();
  const DeviceImages on_cuda(source, 6, torch::kCUDA), on_cpu(source, 6, torch::kCPU);
  EXPECT_TRUE(on_cuda.device().is_cuda());
  EXPECT_EQ(on_cuda.bytes(), on_cpu.bytes());
  const PixelCase cases[] = {
      {"default", 1, 0, 0, 0, 640}, {"rotated perspective", 1, 10, 2, 5e-4, 640}, {"single tail", 0, 0, 0, 0, 600}};
  for (const auto& c : cases) {
    const auto o = c.options();
    std::vector<PixelPlan> plans;
    std::vector<Tensor> want;
    for (int64_t k = 0; k < 8; ++k) {
      PixelPlan plan;
      plan_sample(source, 6, k % 6, o, 9, k / 6, plan);
      plans.push_back(plan);
      want.push_back(augment_sample(source, 6, k % 6, o, 9, k / 6).image.permute({2, 0, 1}));
    }
    (void)render_batch(on_cuda, plans);  // warm-up
    Tensor out;
    EXPECT_EQ(count_syncs([&] { out = render_batch(on_cuda, plans); }), 0) << c.name;
    ASSERT_TRUE(out.is_cuda());
    const auto expected = torch::stack(want);
    EXPECT_EQ(out.cpu().ne(expected).sum().item<int64_t>(), 0) << c.name;
    EXPECT_TRUE(torch::equal(render_batch(on_cpu, plans), expected)) << c.name;
  }
}

// A loader with device pixels on CUDA hands over images on the device and every byte of the CPU
// loader's batches, with several workers.
TEST(LoaderGpu, DevicePixelsOnCuda) {
  const auto source = training_size_source();
  LoaderOptions o;
  o.dataset_size = 6;
  o.imgsz = 320;
  o.batch = 4;
  o.workers = 3;
  o.seed = 4;
  auto with = o;
  with.device_images = std::make_shared<const DeviceImages>(source, 6, torch::kCUDA);
  Loader device(source, with), cpu(source, o);
  for (int64_t epoch : {0, 1}) {
    device.start_epoch(epoch);
    cpu.start_epoch(epoch);
    while (auto a = device.next()) {
      auto b = cpu.next();
      ASSERT_TRUE(b.has_value());
      EXPECT_TRUE(a->images.is_cuda());
      EXPECT_TRUE(a->targets.masks.is_pinned());
      EXPECT_TRUE(torch::equal(a->images.cpu(), b->images));
      EXPECT_TRUE(torch::equal(a->hsv_gains, b->hsv_gains));
      EXPECT_TRUE(torch::equal(a->targets.bboxes, b->targets.bboxes));
      EXPECT_TRUE(torch::equal(a->targets.masks, b->targets.masks));
      EXPECT_TRUE(torch::equal(a->targets.sem_masks, b->targets.sem_masks));
    }
    EXPECT_FALSE(cpu.next().has_value());
  }
}

// The training step's input (data/network_input.h): the fused CUDA kernel gives the bytes of the
// tensor-operation form (HSV tables, FP32 scaling, channels-last), with and without jitter, for rows
// of a multiple of 32 pixels and with OpenCV's scalar tail, without a host synchronisation; into a
// given buffer too, and a buffer of another layout refused.
TEST(NetworkInputGpu, FusedKernelGivesTheTensorFormsBytes) {
  torch::manual_seed(3);
  for (int64_t w : {640, 100, 37}) {
    auto imgs = torch::randint(0, 256, {4, 3, 40, w}, torch::kUInt8).to(torch::kCUDA);
    auto gains = (torch::rand({4, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
    for (bool jitter : {true, false}) {
      const Tensor g = jitter ? gains : Tensor();
      auto expected = network_input_ops(imgs, g);
      Tensor got;
      EXPECT_EQ(count_syncs([&] { got = network_input(imgs, g); }), 0) << w;
      ASSERT_EQ(got.sizes(), expected.sizes());
      EXPECT_EQ(got.scalar_type(), torch::kFloat);
      EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(torch::equal(got, expected))
          << "width " << w << " jitter " << jitter << " max diff " << (got - expected).abs().max().item<float>();
      // Written into a given buffer (the whole-step recordings' input): that buffer, the same bytes.
      auto into = torch::full_like(expected, -1.0f);
      auto written = network_input(imgs, g, into);
      EXPECT_TRUE(written.is_same(into));
      EXPECT_TRUE(torch::equal(into, expected)) << "width " << w << " jitter " << jitter;
    }
  }
  auto imgs = torch::zeros({2, 3, 8, 8}, torch::TensorOptions(torch::kUInt8).device(torch::kCUDA));
  EXPECT_THROW(network_input(imgs, Tensor(), torch::empty({2, 3, 8, 8}, torch::kCUDA)), std::invalid_argument);
}
