// The class term's element-wise BCE with logits (binary_cross_entropy_with_logits, reduction none):
// on CUDA FP32 one kernel each way (loss/class_bce_cuda.h) with ATen's bytes, elsewhere ATen's.
#pragma once
#include <torch/torch.h>

namespace lucid::loss {

using torch::Tensor;

// target carries no gradient.
Tensor class_bce(const Tensor& logits, const Tensor& target);

}  // namespace lucid::loss
