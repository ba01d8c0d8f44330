// The parts of the semantic term that cover whole (B, C, H, W) maps: the mean BCE with logits, and
// the Dice sums of the sigmoid times the target and of the sigmoid over each map. On CUDA FP32 maps
// of one layout one kernel each way (loss/semantic_term_cuda.h) with ATen's element bytes and ATen's
// reductions; elsewhere ATen's operations.
#pragma once
#include <torch/torch.h>

namespace lucid::loss {

using torch::Tensor;

struct SemanticParts {
  Tensor bce;       // 0-dim: binary_cross_entropy_with_logits(logits, target), mean
  Tensor inter;     // (B, C): (sigmoid(logits) * target).sum((2, 3))
  Tensor prob_sum;  // (B, C): sigmoid(logits).sum((2, 3))
};

// target carries no gradient.
SemanticParts semantic_parts(const Tensor& logits, const Tensor& target);

}  // namespace lucid::loss
