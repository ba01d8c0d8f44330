// The depthwise convolution kernels (model/depthwise_cuda.h) against LibTorch's convolution (cuDNN,
// TF32 off) on the same inputs: the output, the input gradient and the weight gradient, in FP32
// (to rounding) and in BF16 (to BF16's precision), for 1x1 to 7x7 kernels, odd sizes and a single
// row; two runs give the same bytes; recorded in a CUDA graph and replayed they give the eager
// bytes; a Conv block routes exactly its depthwise convolutions there.
#include <gtest/gtest.h>

#include "lucid/model/blocks.h"
#include "lucid/model/depthwise.h"
#include "lucid/util/device.h"
#ifdef LUCID_CUDA_KERNELS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include "lucid/model/depthwise_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

struct Result {
  Tensor y, gx, gw;
};

// y = conv(x, w) with k / 2 padding and groups = channels, then y's gradient against a fixed
// cotangent, through our kernels (ours) or LibTorch's convolution.
Result run(const Tensor& x0, const Tensor& w0, const Tensor& cotangent, bool ours) {
  auto x = x0.detach().clone().contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  auto w = w0.detach().clone().requires_grad_(true);
  const int64_t c = w.size(0), k = w.size(2);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(c, c, k).padding(k / 2).groups(c).bias(false));
  conv->to(x.device(), x.scalar_type());
  Tensor y;
  if (ours) {
    conv->weight = w;  // the module's weight is the leaf whose gradient we read
    EXPECT_TRUE(model::takes_depthwise_kernel(*conv, x));
    y = model::depthwise_forward(*conv, x);
  } else {
    y = torch::conv2d(x, w, {}, 1, k / 2, 1, c);
  }
  y.backward(cotangent);
  return {y.detach(), x.grad(), w.grad()};
}

void expect_close(const Tensor& a, const Tensor& b, double tolerance, const std::string& what) {
  const auto scale = b.abs().max().item<double>() + 1e-6;
  const auto diff = (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
  EXPECT_LE(diff / scale, tolerance) << what << ": largest difference " << diff << " of " << scale;
}

}  // namespace

TEST(DepthwiseGpu, KernelsMatchTheLibTorchConvolution) {
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  at::globalContext().setAllowTF32CuDNN(false);
  model::set_depthwise_kernels(true);
  struct Case {
    int64_t n, c, h, w, k;
  };
  for (auto [n, c, h, w, k] : {Case{2, 40, 13, 17, 3}, Case{3, 64, 20, 20, 3}, Case{1, 7, 1, 9, 3},
                               Case{2, 33, 11, 6, 5}, Case{1, 16, 9, 9, 7}, Case{2, 24, 5, 8, 1}}) {
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      torch::manual_seed(n * 1000 + c + k);
      const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
      auto x = torch::randn({n, c, h, w}, opts), wt = torch::randn({c, 1, k, k}, opts);
      auto cot = torch::randn({n, c, h, w}, opts).contiguous(at::MemoryFormat::ChannelsLast);
      const auto ours = run(x, wt, cot, true), ref = run(x, wt, cot, false);
      const double tol = dtype == torch::kFloat ? 1e-5 : 2e-2;
      const std::string tag = c10::str("n", n, " c", c, " ", h, "x", w, " k", k, " ", dtype);
      expect_close(ours.y, ref.y, tol, tag + " output");
      expect_close(ours.gx, ref.gx, tol, tag + " input gradient");
      expect_close(ours.gw, ref.gw, tol * 4, tag + " weight gradient");
      EXPECT_TRUE(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast)) << tag;
      const auto again = run(x, wt, cot, true);
      EXPECT_TRUE(torch::equal(again.y, ours.y) && torch::equal(again.gx, ours.gx) && torch::equal(again.gw, ours.gw))
          << tag << ": two runs differ";
    }
  }
#endif
}

TEST(DepthwiseGpu, ConvBlocksRouteTheirDepthwiseConvolutionsOnly) {
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  model::set_depthwise_kernels(true);
  const auto x = torch::randn({2, 32, 16, 16}, torch::TensorOptions().device(torch::kCUDA));
  auto depthwise = model::DWConv(32, 32, 3);
  auto wider = model::DWConv(32, 64, 3);  // groups = gcd = 32, 2 outputs per group
  auto strided = model::Conv(32, 32, 3, 2, 32);
  auto dense = model::Conv(32, 32, 3);
  EXPECT_TRUE(model::takes_depthwise_kernel(*depthwise->conv, x));
  EXPECT_FALSE(model::takes_depthwise_kernel(*wider->conv, x));
  EXPECT_FALSE(model::takes_depthwise_kernel(*strided->conv, x));
  EXPECT_FALSE(model::takes_depthwise_kernel(*dense->conv, x));
  EXPECT_FALSE(model::takes_depthwise_kernel(*depthwise->conv, x.cpu()));
  model::set_depthwise_kernels(false);
  EXPECT_FALSE(model::takes_depthwise_kernel(*depthwise->conv, x));
  model::set_depthwise_kernels(true);
  // Under BF16 autocast the block's output is what LibTorch's autocast convolution gives, to BF16.
  depthwise->to(torch::kCUDA);
  depthwise->eval();
  Tensor ours, ref;
  {
    util::Autocast autocast(true);
    ours = depthwise(x);
    ref = depthwise->bn(torch::conv2d(x, depthwise->conv->weight, {}, 1, 1, 1, 32));
  }
  expect_close(ours, torch::silu(ref), 2e-2, "Conv block under autocast");
#endif
}

TEST(DepthwiseGpu, ReplayedFromACudaGraphTheKernelsGiveTheEagerBytes) {
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  torch::manual_seed(7);
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto x = torch::randn({4, 48, 24, 20}, opts).contiguous(at::MemoryFormat::ChannelsLast);
  const auto gy = torch::randn({4, 48, 24, 20}, opts).contiguous(at::MemoryFormat::ChannelsLast);
  const auto w = torch::randn({48, 1, 3, 3}, opts);
  auto all = [&] {
    return std::vector<Tensor>{model::cuda::depthwise_conv(x, w, false), model::cuda::depthwise_conv(gy, w, true),
                               model::cuda::depthwise_weight_grad(x, gy, 3)};
  };
  const auto eager = all();
  std::vector<Tensor> recorded;
  at::cuda::CUDAGraph graph;
  torch::cuda::synchronize();  // the inputs, written on the default stream, are ready for the side stream
  {
    const c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool());
    all();  // warm-up on the capture stream
    graph.capture_begin();
    recorded = all();
    graph.capture_end();
  }
  for (auto& t : recorded) t.zero_();
  graph.replay();
  torch::cuda::synchronize();
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(torch::equal(recorded[i], eager[i])) << "output " << i;
#endif
}
