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

// The plain definitions, one output element or one weight-gradient block at a time: every tap in
// row-major order (weight (K-1-a, K-1-b) when flipped), the zero padding's taps left out.
template <typename T, int K>
Tensor plain_conv(const Tensor& x, const Tensor& w, bool flipped) {
  auto y = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
  const auto s = shape_of(x);
  const T *xp = x.data_ptr<T>(), *wp = w.data_ptr<T>();
  for (int i = 0; i < static_cast<int>(x.numel()); ++i) {
    const int c = i % s.c, col = i / s.c % s.w, h = i / s.c / s.w % s.h, n = i / s.c / s.w / s.h;
    float acc = 0.f;
    for (int a = 0; a < K; ++a)
      for (int b = 0; b < K; ++b) {
        const int hi = h + a - K / 2, wi = col + b - K / 2, tap = flipped ? K * K - 1 - (a * K + b) : a * K + b;
        if (hi >= 0 && hi < s.h && wi >= 0 && wi < s.w)
          acc +=
              static_cast<float>(xp[((n * s.h + hi) * s.w + wi) * s.c + c]) * static_cast<float>(wp[c * K * K + tap]);
      }
    y.data_ptr<T>()[i] = static_cast<T>(acc);
  }
  return y;
}

template <typename T, int K>
Tensor plain_partials(const Tensor& x, const Tensor& gy) {
  const auto s = shape_of(x);
  const auto split = dw::row_blocks(int64_t{s.n} * s.h);
  auto partial = torch::zeros({split.blocks, s.c, K * K}, torch::kFloat);
  auto sums = partial.accessor<float, 3>();
  const T *xp = x.data_ptr<T>(), *gp = gy.data_ptr<T>();
  for (int r = 0; r < s.n * s.h; ++r)
    for (int col = 0; col < s.w; ++col)
      for (int c = 0; c < s.c; ++c)
        for (int a = 0; a < K; ++a)
          for (int b = 0; b < K; ++b) {
            const int hi = r % s.h + a - K / 2, wi = col + b - K / 2;
            if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
            sums[r / split.rows_per_block][c][a * K + b] +=
                static_cast<float>(xp[((r + a - K / 2) * s.w + wi) * s.c + c]) *
                static_cast<float>(gp[(r * s.w + col) * s.c + c]);
          }
  return partial;
}

// depthwise_conv_kernel's result: output_strip for every work item (strip_at) of the output.
template <typename T, int K>
Tensor emulated_conv(const Tensor& x, const Tensor& w, bool flipped) {
  auto y = torch::full_like(x, std::nan(""), at::MemoryFormat::ChannelsLast);
  const auto s = shape_of(x);
  for (int i = 0; i < s.n * s.h * dw::strips_per_row(s) * s.c; ++i) {
    const auto item = dw::strip_at(i, s);
    dw::output_strip<T, K>(x.data_ptr<T>(), w.data_ptr<T>(), y.data_ptr<T>(), s, flipped, item.n, item.h, item.col0,
                           item.c);
  }
  return y;
}

// The weight gradient's first pass: every row block's partial sums.
template <typename T, int K>
Tensor emulated_partials(const Tensor& x, const Tensor& gy) {
  const auto s = shape_of(x);
  const auto split = dw::row_blocks(int64_t{s.n} * s.h);
  auto partial = torch::full({split.blocks, s.c, K * K}, std::nan(""), torch::kFloat);
  for (int block = 0; block < split.blocks; ++block)
    for (int c = 0; c < s.c; ++c)
      dw::weight_partial<T, K>(x.data_ptr<T>(), gy.data_ptr<T>(), partial.data_ptr<float>(), s,
                               static_cast<int>(split.rows_per_block), block, c);
  return partial;
}

// depthwise_weight_grad's FP32 result: the partial sums, then each gradient's warp.
Tensor emulated_weight_grad(const Tensor& partial, int64_t k) {
  const int64_t blocks = partial.size(0), per_block = partial.size(1) * partial.size(2);
  auto grad = torch::empty({partial.size(1), 1, k, k}, torch::kFloat);
  for (int64_t i = 0; i < per_block; ++i) {
    float shares[dw::kLanes];
    for (int lane = 0; lane < dw::kLanes; ++lane)
      shares[lane] = dw::lane_share(partial.data_ptr<float>(), blocks, per_block, i, lane);
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
  const auto y = emulated_conv<T, K>(x, w, false), gx = emulated_conv<T, K>(gy, w, true);
  const auto partial = emulated_partials<T, K>(x, gy);
  expect_close(y, want.y, relative, floor, what + " output");
  expect_close(gx, want.gx, relative, floor, what + " input gradient");
  // The weight gradient is compared before its final cast: FP32 sums of the rounded products.
  expect_close(emulated_weight_grad(partial, K), want.gw, 1e-5, 1e-5, what + " weight gradient");
  // The sliding windows load differently but add in the plain definitions' order: the same bytes.
  EXPECT_TRUE(torch::equal(y, plain_conv<T, K>(x, w, false))) << what << " output";
  EXPECT_TRUE(torch::equal(gx, plain_conv<T, K>(gy, w, true))) << what << " input gradient";
  EXPECT_TRUE(torch::equal(partial, plain_partials<T, K>(x, gy))) << what << " partial sums";
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
  for (int64_t rows : {0, 1, 5, 1024, 4096, 4097, 8193, 80 * 64, 160 * 64}) {
    const auto split = dw::row_blocks(rows);
    EXPECT_LE(split.blocks, dw::kWeightGradBlocks) << rows;
    EXPECT_GE(split.blocks * split.rows_per_block, rows) << rows;
    EXPECT_LT((split.blocks - 1) * split.rows_per_block, std::max<int64_t>(rows, 1)) << rows;
  }
  EXPECT_EQ(dw::row_blocks(4097).rows_per_block, 2);
  EXPECT_EQ(dw::row_blocks(4097).blocks, 2049);
}

// 1 x 4097 image rows: 2048 blocks of 2 rows and a last block of 1; 2 x 2049: blocks that span two
// images.
TEST(DepthwiseMath, WeightGradientOverManyRowBlocks) {
  check_against_libtorch<float, 3>({1, 3, 4097, 3}, torch::kFloat, 1e-5, 1e-6);
  check_against_libtorch<float, 5>({2, 2, 2049, 2}, torch::kFloat, 1e-5, 1e-6);
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
