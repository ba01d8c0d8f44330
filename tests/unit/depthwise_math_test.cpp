// The depthwise kernels' arithmetic (model/depthwise_math.h, the functions the CUDA kernels call per
// element) run in plain loops on the CPU against LibTorch's convolution in FP64: the output, the
// input gradient (the flipped forward of the output's gradient) and the weight gradient (row-block
// partial sums, then summed in block order), in FP32 and BF16, for 1x1 to 7x7 kernels, single rows
// and columns, and images whose N * H rows split into several row blocks with a short last one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "lucid/model/depthwise_math.h"

namespace dw = lucid::model::depthwise;
using torch::Tensor;

namespace {

dw::Shape shape_of(const Tensor& x) {
  return {static_cast<int>(x.size(0)), static_cast<int>(x.size(1)), static_cast<int>(x.size(2)),
          static_cast<int>(x.size(3))};
}

// depthwise_conv_kernel's result: output_element for every index of the channels_last output.
template <typename T, int K>
Tensor emulated_conv(const Tensor& x, const Tensor& w, bool flipped) {
  auto y = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
  const auto s = shape_of(x);
  for (int i = 0; i < static_cast<int>(x.numel()); ++i)
    y.data_ptr<T>()[i] = dw::output_element<T, K>(x.data_ptr<T>(), w.data_ptr<T>(), s, flipped, i);
  return y;
}

// depthwise_weight_grad's FP32 result: every row block's partial sums, then each gradient's warp.
template <typename T, int K>
Tensor emulated_weight_grad(const Tensor& x, const Tensor& gy) {
  const auto s = shape_of(x);
  const auto split = dw::row_blocks(int64_t{s.n} * s.h);
  const int64_t per_block = int64_t{s.c} * K * K;
  auto partial = torch::full({split.blocks, per_block}, std::nan(""), torch::kFloat);
  for (int block = 0; block < split.blocks; ++block)
    for (int c = 0; c < s.c; ++c)
      dw::weight_partial<T, K>(x.data_ptr<T>(), gy.data_ptr<T>(), partial.data_ptr<float>(), s,
                               static_cast<int>(split.rows_per_block), block, c);
  auto grad = torch::empty({s.c, 1, K, K}, torch::kFloat);
  for (int64_t i = 0; i < per_block; ++i) {
    float shares[dw::kLanes];
    for (int lane = 0; lane < dw::kLanes; ++lane)
      shares[lane] = dw::lane_share(partial.data_ptr<float>(), split.blocks, per_block, i, lane);
    grad.data_ptr<float>()[i] = dw::add_shares_as_the_warp(shares);
  }
  return grad;
}

struct Gradients {
  Tensor y, gx, gw;
};

// The FP64 reference on the same (already rounded) values.
Gradients reference(const Tensor& x, const Tensor& w, const Tensor& gy) {
  auto xd = x.to(torch::kDouble).contiguous().requires_grad_(true);
  auto wd = w.to(torch::kDouble).requires_grad_(true);
  const int64_t k = w.size(2);
  auto y = torch::conv2d(xd, wd, {}, 1, k / 2, 1, w.size(0));
  y.backward(gy.to(torch::kDouble));
  return {y.detach(), xd.grad(), wd.grad()};
}

// Every element within `relative` of its reference value, plus `floor` of the reference's largest.
void expect_close(const Tensor& got, const Tensor& want, double relative, double floor, const std::string& what) {
  const auto g = got.to(torch::kDouble).contiguous(), r = want.to(torch::kDouble).contiguous();
  ASSERT_EQ(g.sizes(), r.sizes()) << what;
  const auto bound = r.abs() * relative + r.abs().max() * floor;
  const auto over = ((g - r).abs() > bound).sum().item<int64_t>();
  EXPECT_EQ(over, 0) << what << ": " << over << " elements outside, largest difference "
                     << (g - r).abs().max().item<double>() << " of " << r.abs().max().item<double>();
}

template <typename T, int K>
void check_against_libtorch(std::vector<int64_t> sizes, torch::ScalarType dtype, double relative, double floor) {
  const std::string what = c10::str("k", K, " ", dtype, " ", at::IntArrayRef(sizes));
  torch::manual_seed(K * 100 + sizes[2]);
  const auto x = torch::randn(sizes).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
  const auto gy = torch::randn(sizes).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
  const auto w = torch::randn({sizes[1], 1, K, K}).to(dtype).contiguous();
  const auto want = reference(x, w, gy);
  expect_close(emulated_conv<T, K>(x, w, false), want.y, relative, floor, what + " output");
  expect_close(emulated_conv<T, K>(gy, w, true), want.gx, relative, floor, what + " input gradient");
  // The weight gradient is compared before its final cast: FP32 sums of the rounded products.
  expect_close(emulated_weight_grad<T, K>(x, gy), want.gw, 1e-5, 1e-5, what + " weight gradient");
}

template <typename T>
void check_every_kernel_size(torch::ScalarType dtype, double relative, double floor) {
  for (std::vector<int64_t> sizes : {std::vector<int64_t>{2, 5, 7, 6}, {1, 3, 1, 9}, {1, 4, 8, 1}, {3, 2, 4, 4}}) {
    check_against_libtorch<T, 1>(sizes, dtype, relative, floor);
    check_against_libtorch<T, 3>(sizes, dtype, relative, floor);
    check_against_libtorch<T, 5>(sizes, dtype, relative, floor);
    check_against_libtorch<T, 7>(sizes, dtype, relative, floor);
  }
}

}  // namespace

TEST(DepthwiseMath, Fp32MatchesTheLibTorchConvolution) { check_every_kernel_size<float>(torch::kFloat, 1e-5, 1e-6); }

// One BF16 rounding of an FP32 sum: within half a BF16 step (BF16's unit roundoff, 2^-8 of the
// value) of the exact value, plus the FP32 sum's own error.
TEST(DepthwiseMath, Bf16IsTheRoundedFp32Sum) {
  check_every_kernel_size<c10::BFloat16>(torch::kBFloat16, 1.0 / 256, 1e-6);
}

TEST(DepthwiseMath, RowBlocksCoverEveryRowOnce) {
  for (int64_t rows : {0, 1, 5, 1024, 1025, 1201, 2049, 80 * 64, 160 * 64}) {
    const auto split = dw::row_blocks(rows);
    EXPECT_LE(split.blocks, dw::kWeightGradBlocks) << rows;
    EXPECT_GE(split.blocks * split.rows_per_block, rows) << rows;
    EXPECT_LT((split.blocks - 1) * split.rows_per_block, std::max<int64_t>(rows, 1)) << rows;
  }
  EXPECT_EQ(dw::row_blocks(1201).rows_per_block, 2);
  EXPECT_EQ(dw::row_blocks(1201).blocks, 601);
}

// 1 x 1201 image rows: 600 blocks of 2 rows and a last block of 1; 2 x 601: blocks that span two images.
TEST(DepthwiseMath, WeightGradientOverManyRowBlocks) {
  check_against_libtorch<float, 3>({1, 3, 1201, 3}, torch::kFloat, 1e-5, 1e-6);
  check_against_libtorch<float, 5>({2, 2, 601, 2}, torch::kFloat, 1e-5, 1e-6);
}

// The warp's tree pairs lane l with lane l + 16 first: 1e8 and -1e8 in lanes 0 and 16 cancel before
// any 1 is added to them, so all thirty ones survive (in lane order FP32 would lose the first 15).
TEST(DepthwiseMath, TheWarpAddsItsSharesAsATree) {
  float shares[dw::kLanes];
  for (auto& s : shares) s = 1.f;
  shares[0] = 1e8f;
  shares[16] = -1e8f;
  EXPECT_EQ(dw::add_shares_as_the_warp(shares), 30.f);
}
