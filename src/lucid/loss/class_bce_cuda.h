// The class term's element-wise BCE with logits as one CUDA kernel each way, where ATen runs five
// kernels forward (log-sigmoid, a fill, two subtractions, a product) and three backward (sigmoid,
// subtraction, product) over every (image, anchor, class). Each element goes through ATen's
// operations in their order, each rounded as its own kernel rounds it, so the bytes are ATen's.
// Built with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::loss::cuda {

using at::Tensor;

// Whether the kernels take these: CUDA FP32 logits and targets of one shape.
bool class_bce_available(const Tensor& logits, const Tensor& target);

// (1 - t) * x - log_sigmoid(x), element-wise: binary_cross_entropy_with_logits(reduction=none).
Tensor class_bce_forward(const Tensor& logits, const Tensor& target);

// (sigmoid(x) - t) * grad; grad of the logits' shape, or a scalar expanded to it.
Tensor class_bce_backward(const Tensor& grad, const Tensor& logits, const Tensor& target);

}  // namespace lucid::loss::cuda
