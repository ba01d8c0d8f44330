// The assigner's top-k candidate kernel (loss/top_candidates_cuda.h) against ATen's topk on the
// same metrics: for every valid slot, the same set of anchors. The rows hold what decides a radix
// select's set: ties at the k-th value (values on a coarse grid, rows mostly zero as the metric is
// outside a GT's candidates), a NaN, -0 beside +0, negative values, and rows of one value. Padding
// slots get 0..k-1. Two runs give the same bytes. The second selection (keep_top_assigned) gives the
// assignment of the ATen form it replaces.
#include <gtest/gtest.h>

#include <limits>

#include "lucid/loss/assigner.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/top_candidates_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

// (B, M, A) metrics: slot m of each image draws its row from one of the kinds above.
Tensor make_metric(int64_t B, int64_t M, int64_t A, uint64_t seed) {
  torch::manual_seed(seed);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  auto grid = torch::randint(0, 6, {B, M, A}, f) / 5.0;          // ties everywhere
  auto sparse = torch::where(torch::rand({B, M, A}, f) < 0.004,  // a few candidates among zeros
                             torch::randint(1, 4, {B, M, A}, f) / 3.0, torch::zeros({}, f));
  auto wide = torch::randn({B, M, A}, f);       // negative values, no ties
  auto flat = torch::full({B, M, A}, 0.25, f);  // one value
  auto kind = torch::arange(M, f.dtype(torch::kLong)).remainder(4).view({1, M, 1});
  auto m = torch::where(kind == 0, grid, torch::where(kind == 1, sparse, torch::where(kind == 2, wide, flat)));
  m = m.contiguous();
  m[0][1][7] = std::numeric_limits<float>::quiet_NaN();
  m[0][1][8] = -0.0f;  // beside the zeros of a sparse row: +0 ranks above -0
  m[0][0][3] = -0.0f;
  return m;
}

}  // namespace

TEST(TopCandidatesGpu, SelectsAtensTopKSetForEveryValidSlot) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  // 8400 anchors: a 640-pixel input's; 300 is not a multiple of the block; 1,024 slots of 8400 take
  // ATen's multi-block top-k, as a batch-64 fit at capacity 16 does, the others its single-block one.
  struct Shape {
    int64_t B, M, A;
  };
  for (const Shape& sh : {Shape{3, 12, 8400}, Shape{3, 12, 300}, Shape{8, 128, 8400}}) {
    const int64_t A = sh.A;
    const auto metric = make_metric(sh.B, sh.M, A, 7 + static_cast<uint64_t>(A + sh.M));
    const auto valid = torch::rand({sh.B, sh.M}, metric.options()) < 0.7;
    valid[0][0] = true;
    valid[0][1] = true;
    ASSERT_TRUE(loss::cuda::top_candidates_available(metric));
    for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{10}, int64_t{21}, int64_t{30}, A}) {
      const std::string what = c10::str(sh.B, " x ", sh.M, " slots of ", A, ", k ", k);
      const auto got = loss::cuda::top_candidates(metric, k, valid);
      const auto want = std::get<1>(metric.topk(k, -1, /*largest=*/true));
      ASSERT_EQ(got.sizes(), want.sizes()) << what;
      const auto got_set = std::get<0>(got.sort(-1)), want_set = std::get<0>(want.sort(-1));
      const auto rows_equal = got_set.eq(want_set).all(-1);  // (B, M)
      EXPECT_TRUE((rows_equal | ~valid).all().item<bool>())
          << what << ": " << (~rows_equal & valid).sum().item<int64_t>() << " valid slots select other anchors";
      const auto padding = torch::arange(k, got.options()).expand_as(got);
      EXPECT_TRUE(torch::equal(got.masked_select(~valid.unsqueeze(-1)), padding.masked_select(~valid.unsqueeze(-1))))
          << what << ": padding slots";
      EXPECT_TRUE(torch::equal(got, loss::cuda::top_candidates(metric, k, valid))) << what << ": two runs differ";
    }
  }
  // The assigner's entry takes the kernel on CUDA FP32 and gives the same set.
  const auto metric = make_metric(2, 8, 8400, 3);
  const auto valid = torch::ones({2, 8}, metric.options().dtype(torch::kBool));
  auto via = loss::TaskAlignedAssigner::top_candidates(metric, 10, valid);
  EXPECT_TRUE(torch::equal(via, loss::cuda::top_candidates(metric, 10, valid)));
#endif
}

TEST(TopCandidatesGpu, KeepTopAssignedGivesTheAtenFormsAssignment) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  // The one-to-one assigner's second selection (top-1 of each GT's metric times its assignment
  // mask) against the ATen form it replaces, with metrics that tie (a coarse grid, zeros, so that
  // an unassigned anchor of lower index can win a tie) and k of 1 and 3.
  const int64_t B = 3, M = 9, A = 2100;
  const auto metric = make_metric(B, M, A, 21).abs().contiguous();
  const auto f = metric.options();
  auto gts = torch::randint(-1, M, {B, A}, f.dtype(torch::kLong));
  gts.select(0, 2).fill_(-1);  // an image with no anchor assigned
  for (int64_t k : {int64_t{1}, int64_t{3}}) {
    auto mask_pos = (torch::arange(M, gts.options()).view({1, M, 1}) == gts.unsqueeze(1)).to(torch::kFloat);
    auto kept = std::get<1>((metric * mask_pos).topk(k, -1, true));
    mask_pos = mask_pos * torch::zeros_like(mask_pos).scatter_(-1, kept, 1.0);
    const auto want = torch::where(mask_pos.sum(-2) > 0, mask_pos.argmax(-2), torch::full({}, -1, gts.options()));
    const auto got = loss::cuda::keep_top_assigned(metric, gts.contiguous(), k);
    EXPECT_TRUE(torch::equal(got, want)) << "k " << k << ": " << got.ne(want).sum().item<int64_t>()
                                         << " anchors differ";
    EXPECT_GT(got.ge(0).sum().item<int64_t>(), 0) << "k " << k << ": no anchor kept";
    EXPECT_LT(got.ge(0).sum().item<int64_t>(), gts.ge(0).sum().item<int64_t>()) << "k " << k << ": none dropped";
  }
#endif
}
