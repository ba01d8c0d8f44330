// The semantic term's fused kernels (loss/semantic_term_cuda.h) against ATen's operations on the
// same CUDA maps, in the network's channels_last layout and in the contiguous one: the BCE mean, the
// Dice sums and the logits' gradient through the whole BCE + Dice term are the same bytes. The
// Dice sums are also those of a contiguous target, as the loss built it before it took the
// prediction's layout.
#include <gtest/gtest.h>

#include "lucid/loss/semantic_term.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/semantic_term_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

struct Term {
  loss::SemanticParts parts;
  Tensor total, grad;
};

loss::SemanticParts aten_parts(const Tensor& x, const Tensor& t) {
  auto p = x.sigmoid();
  return {torch::nn::functional::binary_cross_entropy_with_logits(x, t), (p * t).sum({2, 3}), p.sum({2, 3})};
}

// The loss's BCE + Dice term from the parts, and the logits' gradient through it.
Term run(const Tensor& logits, const Tensor& target, bool fused) {
  auto x = logits.detach().clone(at::MemoryFormat::Preserve).requires_grad_(true);
  Term out;
  out.parts = fused ? loss::semantic_parts(x, target) : aten_parts(x, target);
  auto uni = out.parts.prob_sum + target.sum({2, 3});
  auto dice = (2.0 * out.parts.inter + 1) / (uni + 1);
  out.total = 0.5 * out.parts.bce + 0.5 * (1.0 - dice).mean(1).mean();
  out.total.backward();
  out.grad = x.grad();
  return out;
}

}  // namespace

TEST(SemanticTermGpu, FusedKernelsGiveAtensBytes) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  torch::manual_seed(8);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  for (auto layout : {torch::MemoryFormat::ChannelsLast, torch::MemoryFormat::Contiguous}) {
    const bool cl = layout == torch::MemoryFormat::ChannelsLast;
    auto values = torch::randn({3, 5, 40, 48}, f) * 6;
    values.view(-1).narrow(0, 0, 4).copy_(torch::tensor({-100.f, 100.f, -0.f, 0.f}, f));
    const auto logits = values.contiguous(layout);
    auto target = (torch::rand({3, 5, 40, 48}, f) < 0.2).to(torch::kFloat).contiguous(layout);
    ASSERT_TRUE(loss::cuda::semantic_kernels_available(logits, target)) << (cl ? "channels_last" : "contiguous");
    const auto fused = run(logits, target, true), aten = run(logits, target, false);
    const std::string what = cl ? "channels_last" : "contiguous";
    EXPECT_TRUE(torch::equal(fused.parts.bce, aten.parts.bce)) << what << ": BCE mean";
    EXPECT_TRUE(torch::equal(fused.parts.inter, aten.parts.inter)) << what << ": Dice intersections";
    EXPECT_TRUE(torch::equal(fused.parts.prob_sum, aten.parts.prob_sum)) << what << ": sigmoid sums";
    EXPECT_TRUE(torch::equal(fused.total, aten.total)) << what << ": term";
    EXPECT_TRUE(torch::equal(fused.grad, aten.grad))
        << what << ": " << fused.grad.ne(aten.grad).sum().item<int64_t>() << " gradients differ, max "
        << (fused.grad - aten.grad).abs().max().item<float>();
    if (cl) {
      // ATen's product takes the prediction's layout whatever the target's: the Dice sums (and so
      // the gradients) are those of the contiguous target the loss used to build.
      const auto before = aten_parts(logits, target.contiguous());
      EXPECT_TRUE(torch::equal(fused.parts.inter, before.inter)) << "intersections with a contiguous target";
      EXPECT_TRUE(torch::equal(fused.parts.prob_sum, before.prob_sum));
    }
  }
#endif
}
