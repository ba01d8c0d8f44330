// The semantic term's map-sized work as one CUDA kernel each way. Forward: the BCE terms, the
// sigmoid and the sigmoid times the target. Backward: the logits' gradient from the BCE mean, the
// Dice intersection and the sigmoid's sum. ATen runs about a dozen kernels over the (B, C, H, W) map
// for the two. Each element goes through ATen's operations in their order, each rounded as its own
// kernel rounds it; the reductions stay ATen's. Built with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::loss::cuda {

using at::Tensor;

// Whether the kernels take these: CUDA FP32 (B, C, H, W) logits and targets with the same dense
// strides, fewer than 2^31 elements.
bool semantic_kernels_available(const Tensor& logits, const Tensor& target);

struct SemanticMaps {
  Tensor terms;        // binary_cross_entropy_with_logits, element-wise
  Tensor prob;         // sigmoid(logits)
  Tensor prob_target;  // prob * target
};

// Outputs in the logits' layout.
SemanticMaps semantic_forward(const Tensor& logits, const Tensor& target);

// The logits' gradient given those of terms.mean() (g_bce, 0-dim), of prob_target.sum((2, 3))
// (g_inter, (B, C)) and of prob.sum((2, 3)) (g_prob, (B, C)).
Tensor semantic_backward(const Tensor& logits, const Tensor& target, const Tensor& prob, const Tensor& g_bce,
                         const Tensor& g_inter, const Tensor& g_prob);

}  // namespace lucid::loss::cuda
