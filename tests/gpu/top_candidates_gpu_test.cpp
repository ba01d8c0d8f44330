// The assigner's top-k candidate kernel (loss/top_candidates_cuda.h) against ATen's topk on the
// same metrics: for every valid slot, the same set of anchors. The rows hold what decides a radix
// select's set: ties at the k-th value (values on a coarse grid, rows mostly zero as the metric is
// outside a GT's candidates), a NaN, -0 beside +0, negative values, and rows of one value. Padding
// slots get 0..k-1. Two runs give the same bytes.
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
  // 8400 anchors: a 640-pixel input's; 300 is not a multiple of the block; k up to the whole row.
  for (int64_t A : {int64_t{8400}, int64_t{300}}) {
    const auto metric = make_metric(3, 12, A, 7 + static_cast<uint64_t>(A));
    const auto valid = torch::rand({3, 12}, metric.options()) < 0.7;
    valid[0][0] = true;
    valid[0][1] = true;
    ASSERT_TRUE(loss::cuda::top_candidates_available(metric));
    for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{10}, int64_t{21}, int64_t{30}, A}) {
      const std::string what = c10::str("A ", A, ", k ", k);
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
