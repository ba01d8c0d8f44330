// Device forms of ATen's FP32 CUDA kernels on logits, each operation rounded as its own kernel
// rounds it, so fused kernels built from them give ATen's bytes.
#pragma once

namespace lucid::loss::cuda {

// sigmoid: 1 / (1 + exp(-x)).
__device__ __forceinline__ float aten_sigmoid(float x) { return __fdiv_rn(1.f, __fadd_rn(1.f, expf(-x))); }

// log_sigmoid forward: min(0, x) - log1p(exp(-|x|)), with std::min's choice on -0.
__device__ __forceinline__ float aten_log_sigmoid(float x) {
  const float low = x < 0.f ? x : 0.f;
  return __fsub_rn(low, log1pf(expf(-fabsf(x))));
}

// binary_cross_entropy_with_logits' element: ones.sub_(t).mul_(x).sub_(log_sigmoid(x)).
__device__ __forceinline__ float aten_bce_term(float x, float t) {
  return __fsub_rn(__fmul_rn(__fsub_rn(1.f, t), x), aten_log_sigmoid(x));
}

// sigmoid_backward(grad, y): grad * (1 - y) * y.
__device__ __forceinline__ float aten_sigmoid_backward(float grad, float y) {
  return __fmul_rn(__fmul_rn(grad, __fsub_rn(1.f, y)), y);
}

}  // namespace lucid::loss::cuda
