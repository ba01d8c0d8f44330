// engine::BatchUpload: batches copied on their own stream reach the compute stream's readers whole,
// each reader sees its own batch, though the compute stream is busy long after each upload is
// queued (a buffer written again before its reader ran would give that reader a later batch).
#include <gtest/gtest.h>

#include "lucid/train/batch_upload.h"

using namespace lucid;

TEST(BatchUploadGpu, EveryReaderSeesItsOwnBatchWhileTheComputeStreamLags) {
  const torch::Device device(torch::kCUDA, 0);
  engine::BatchUpload upload(device);
  auto busy = torch::randn({2048, 2048}, torch::TensorOptions().device(device));
  std::vector<torch::Tensor> hosts, sums;
  for (int64_t i = 0; i < 8; ++i) {
    // A batch that differs from every other, and a last, smaller one (a new buffer).
    const int64_t b = i == 7 ? 2 : 4;
    hosts.push_back(torch::randint(0, 256, {b, 3, 320, 320}, torch::kUInt8).pin_memory());
    for (int k = 0; k < 20; ++k) busy = torch::tanh(busy.mm(busy));  // the compute stream lags the host
    auto on_device = upload(hosts.back());
    sums.push_back(on_device.to(torch::kLong).sum({1, 2, 3}));
    upload.read();
  }
  for (size_t i = 0; i < hosts.size(); ++i)
    EXPECT_TRUE(torch::equal(sums[i].cpu(), hosts[i].to(torch::kLong).sum({1, 2, 3}))) << "batch " << i;
}

TEST(BatchUploadGpu, HostMemoryNotPinnedIsPinnedForTheCopy) {
  const torch::Device device(torch::kCUDA, 0);
  engine::BatchUpload upload(device);
  auto host = torch::randint(0, 256, {2, 3, 64, 64}, torch::kUInt8);
  ASSERT_FALSE(host.is_pinned());
  auto on_device = upload(host);
  EXPECT_TRUE(on_device.is_cuda());
  EXPECT_TRUE(torch::equal(on_device.cpu(), host));
  upload.read();
}
