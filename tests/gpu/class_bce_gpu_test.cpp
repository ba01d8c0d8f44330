// The class term's fused BCE kernels (loss/class_bce_cuda.h) against ATen's
// binary_cross_entropy_with_logits on the same CUDA inputs: the element-wise terms, their sum and
// the logits' gradient are the same bytes, for logits from -120 to 120 (exp under- and overflow),
// -0 and +0, soft and hard targets, and a gradient that is a sum's (an expanded scalar) or a
// tensor's.
#include <gtest/gtest.h>

#include "lucid/loss/class_bce.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/class_bce_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

namespace F = torch::nn::functional;

Tensor aten_bce(const Tensor& x, const Tensor& t) {
  return F::binary_cross_entropy_with_logits(x, t,
                                             F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
}

struct Grads {
  Tensor terms, sum, grad;
};

// The loss's use: terms, their sum divided by a normaliser, backward; weight: a per-element weight
// on the terms instead (a gradient that is a full tensor).
Grads run(const Tensor& logits, const Tensor& target, bool fused, const Tensor& weight = {}) {
  auto x = logits.clone().requires_grad_(true);
  auto terms = fused ? loss::class_bce(x, target) : aten_bce(x, target);
  auto sum = weight.defined() ? (terms * weight).sum() : terms.sum() / 37.0;
  sum.backward();
  return {terms.detach(), sum.detach(), x.grad()};
}

}  // namespace

TEST(ClassBceGpu, FusedKernelsGiveAtensBytes) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  torch::manual_seed(5);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  // (B, A, nc) as the loss's, a size that no vector width divides.
  auto x = torch::randn({3, 2101, 7}, f) * 8;
  x.view(-1).narrow(0, 0, 8).copy_(torch::tensor({-120.f, 120.f, -0.f, 0.f, -17.f, 17.f, 88.f, -88.f}, f));
  auto soft = torch::rand({3, 2101, 7}, f) * (torch::rand({3, 2101, 7}, f) < 0.1);  // mostly 0, as class targets
  auto hard = (torch::rand({3, 2101, 7}, f) < 0.5).to(torch::kFloat);
  ASSERT_TRUE(loss::cuda::class_bce_available(x, soft));
  for (const auto& target : {soft, hard}) {
    const auto fused = run(x, target, true), aten = run(x, target, false);
    EXPECT_TRUE(torch::equal(fused.terms, aten.terms))
        << fused.terms.ne(aten.terms).sum().item<int64_t>() << " terms differ, max "
        << (fused.terms - aten.terms).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(fused.sum, aten.sum));
    EXPECT_TRUE(torch::equal(fused.grad, aten.grad))
        << fused.grad.ne(aten.grad).sum().item<int64_t>() << " gradients differ";
    const auto weight = torch::rand({3, 2101, 7}, f);
    const auto fw = run(x, target, true, weight), aw = run(x, target, false, weight);
    EXPECT_TRUE(torch::equal(fw.grad, aw.grad))
        << "a full gradient tensor: " << fw.grad.ne(aw.grad).sum().item<int64_t>() << " gradients differ";
  }
#endif
}
