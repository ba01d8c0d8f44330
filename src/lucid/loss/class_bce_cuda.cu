#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <stdexcept>

#include "lucid/loss/class_bce_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kThreads = 256;

// ATen's log_sigmoid forward on CUDA: min(0, x) - log1p(exp(-|x|)), std::min's choice on -0.
__device__ __forceinline__ float log_sigmoid(float x) {
  const float low = x < 0.f ? x : 0.f;
  return __fsub_rn(low, log1pf(expf(-fabsf(x))));
}

// binary_cross_entropy_with_logits: ones.sub_(t).mul_(x).sub_(log_sigmoid(x)), each rounded.
__global__ void forward_kernel(const float* x, const float* t, int64_t n, float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    out[i] = __fsub_rn(__fmul_rn(__fsub_rn(1.f, t[i]), v), log_sigmoid(v));
  }
}

// Its backward: x.sigmoid().sub_(t).mul_(grad), sigmoid as ATen's 1 / (1 + exp(-x)).
__global__ void backward_kernel(const float* grad, bool scalar_grad, const float* x, const float* t, int64_t n,
                                float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = __fdiv_rn(1.f, __fadd_rn(1.f, expf(-x[i])));
    out[i] = __fmul_rn(__fsub_rn(s, t[i]), scalar_grad ? grad[0] : grad[i]);
  }
}

unsigned blocks_for(int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int64_t cap = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 8;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap)));
}

bool fp32(const Tensor& t) { return t.is_cuda() && t.scalar_type() == at::kFloat; }

}  // namespace

bool class_bce_available(const Tensor& logits, const Tensor& target) {
  return fp32(logits) && fp32(target) && logits.sizes() == target.sizes() && logits.device() == target.device();
}

Tensor class_bce_forward(const Tensor& logits, const Tensor& target) {
  if (!class_bce_available(logits, target) || !logits.is_contiguous() || !target.is_contiguous())
    throw std::invalid_argument("class BCE kernel: contiguous CUDA FP32 logits and targets of one shape expected");
  const c10::cuda::CUDAGuard guard(logits.device());
  auto out = at::empty_like(logits, at::MemoryFormat::Contiguous);
  const int64_t n = logits.numel();
  if (n == 0) return out;
  forward_kernel<<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      logits.data_ptr<float>(), target.data_ptr<float>(), n, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

Tensor class_bce_backward(const Tensor& grad, const Tensor& logits, const Tensor& target) {
  if (!class_bce_available(logits, target) || !logits.is_contiguous() || !target.is_contiguous() || !fp32(grad))
    throw std::invalid_argument("class BCE kernel: contiguous CUDA FP32 logits and targets of one shape expected");
  // A scalar's gradient expanded to the shape (a sum's backward) is read once.
  const auto strides = grad.strides();
  const bool scalar =
      grad.numel() == 1 || std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 0; });
  const Tensor g = scalar ? grad : grad.expand(logits.sizes()).contiguous();
  const c10::cuda::CUDAGuard guard(logits.device());
  auto out = at::empty_like(logits, at::MemoryFormat::Contiguous);
  const int64_t n = logits.numel();
  if (n == 0) return out;
  backward_kernel<<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      g.data_ptr<float>(), scalar, logits.data_ptr<float>(), target.data_ptr<float>(), n, out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::loss::cuda
