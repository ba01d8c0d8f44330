#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <stdexcept>

#include "lucid/loss/class_bce_cuda.h"
#include "lucid/loss/logit_math.cuh"

namespace lucid::loss::cuda {

namespace {

constexpr int kThreads = 256;

// binary_cross_entropy_with_logits, element-wise.
__global__ void forward_kernel(const float* x, const float* t, int64_t n, float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = aten_bce_term(x[i], t[i]);
}

// Its backward: x.sigmoid().sub_(t).mul_(grad).
__global__ void backward_kernel(const float* grad, bool scalar_grad, const float* x, const float* t, int64_t n,
                                float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __fmul_rn(__fsub_rn(aten_sigmoid(x[i]), t[i]), scalar_grad ? grad[0] : grad[i]);
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
