// The loss on CUDA: BF16 predictions under BF16 autocast agree with the FP32 CPU loss of the same
// values; flat CPU targets cost no host synchronisation (padded on the host, uploaded without
// blocking); and on device targets of a fixed bucket, forward and backward run with CUDA's sync
// debug mode set to error, i.e. nothing in them synchronises with the host.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "loss_cases.h"
#include "sync_counter.h"

#include <ATen/autocast_mode.h>

#include "lucid/loss/segmentation_loss.h"

using namespace lucid;
using torch::Tensor;

namespace {

using lucid::test_support::SyncCounter;

// Sync debug mode at `mode` for a scope (restored to disabled).
struct SyncDebug {
  explicit SyncDebug(c10::cuda::SyncDebugMode mode) { c10::cuda::warning_state().set_sync_debug_mode(mode); }
  ~SyncDebug() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
};

}  // namespace

TEST(LossGpu, Bf16AutocastMatchesCpuFp32WithoutSyncs) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  const torch::Device cuda(torch::kCUDA);
  for (bool e2e : {true, false}) {
    for (bool overlap : {true, false}) {
      torch::manual_seed(0);
      loss::LossOptions o;
      o.nc = 3, o.reg_max = e2e ? 1 : 16, o.end2end = e2e, o.overlap_mask = overlap;
      auto raw = loss_cases::random_outputs(4, 160, 224, 3, o.reg_max, e2e);
      auto targets = loss_cases::random_targets({0, 12, 12, 12}, 160, 224, 3, overlap);  // image 0 stays empty
      // CPU FP32 loss on the BF16-rounded values.
      auto bf16_cpu = loss_cases::leaves(raw, torch::kBFloat16, torch::kCPU);
      auto cpu = loss_cases::leaves(bf16_cpu, torch::kFloat, torch::kCPU);
      loss::SegmentationLoss criterion(o);
      auto expected = criterion(cpu, targets);

      auto gpu = loss_cases::leaves(bf16_cpu, torch::kBFloat16, cuda);
      criterion(gpu, targets);  // warm-up (allocator, pinned host blocks)
      torch::cuda::synchronize();
      SyncCounter counter;
      loss::LossResult got;
      {
        c10::WarningUtils::WarningHandlerGuard guard(&counter);
        SyncDebug debug(c10::cuda::SyncDebugMode::L_WARN);
        at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
        at::autocast::set_autocast_enabled(at::kCUDA, true);
        got = criterion(gpu, targets);
        got.total.sum().backward();
        at::autocast::set_autocast_enabled(at::kCUDA, false);
      }
      at::autocast::clear_cache();
      EXPECT_EQ(counter.count, 0) << "e2e " << e2e << " overlap " << overlap;
      auto ours = got.total.detach().cpu(), ref = expected.total.detach();
      for (int k = 0; k < 5; ++k)
        EXPECT_NEAR(ours[k].item<double>(), ref[k].item<double>(), 1e-4 * std::abs(ref[k].item<double>()) + 1e-7)
            << "term " << k << " e2e " << e2e << " overlap " << overlap;
      EXPECT_TRUE(torch::equal(got.one2many.assignment.fg_mask.cpu(), expected.one2many.assignment.fg_mask));
      EXPECT_EQ(gpu.one2many.proto.grad().scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::isfinite(gpu.one2many.scores.grad()).all().item<bool>());
    }
  }
}

TEST(LossGpu, DeviceTargetsOfABucketNeverSynchronise) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  const torch::Device cuda(torch::kCUDA);
  for (bool e2e : {true, false}) {
    for (bool overlap : {true, false}) {
      torch::manual_seed(1);
      loss::LossOptions o;
      o.nc = 3, o.reg_max = e2e ? 1 : 16, o.end2end = e2e, o.overlap_mask = overlap;
      o.mask_chunk_elements = 1 << 18;  // several chunks
      loss::SegmentationLoss criterion(o);
      auto raw = loss_cases::random_outputs(4, 160, 224, 3, o.reg_max, e2e);
      // Static buffers of bucket 16, filled from two batches of that bucket (one with an empty image).
      auto host = criterion.pad(loss_cases::random_targets({9, 16, 3, 11}, 160, 224, 3, overlap), 4, 160, 224);
      ASSERT_EQ(host.capacity(), 16);
      auto buffers = loss::upload(host, cuda);
      for (const auto& counts : {std::vector<int64_t>{9, 16, 3, 11}, std::vector<int64_t>{0, 12, 16, 1}}) {
        loss::copy_targets(criterion.pad(loss_cases::random_targets(counts, 160, 224, 3, overlap), 4, 160, 224, 16),
                           buffers);
        auto preds = loss_cases::leaves(raw, torch::kFloat, cuda);
        torch::cuda::synchronize();
        loss::LossResult r;
        {
          SyncDebug debug(c10::cuda::SyncDebugMode::L_ERROR);
          EXPECT_NO_THROW({
            r = criterion(preds, buffers);
            r.total.sum().backward();
          }) << "e2e "
             << e2e << " overlap " << overlap;
        }
        EXPECT_TRUE(torch::isfinite(r.total).all().item<bool>());
        EXPECT_GT(r.one2many.num_fg.item<int64_t>(), 0);
        EXPECT_TRUE(preds.one2many.mask_coefficient.grad().defined());
      }
    }
  }
}
