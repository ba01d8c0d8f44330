#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <limits>
#include <stdexcept>

#include "lucid/loss/logit_math.cuh"
#include "lucid/loss/semantic_term_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerImage = 64;

__global__ void forward_kernel(const float* x, const float* t, int n, float* terms, float* prob, float* prob_target) {
  const int64_t base = int64_t(blockIdx.y) * n;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
    const int64_t i = base + j;
    const float v = x[i], target = t[i], p = aten_sigmoid(v);
    terms[i] = aten_bce_term(v, target);
    prob[i] = p;
    prob_target[i] = __fmul_rn(p, target);
  }
}

// The gradients that autograd sums at the logits, in ATen's forms:
//   BCE mean: x.sigmoid().sub_(t).mul_(g_bce).div_(n), the division a product with 1 / n;
//   Dice: sigmoid_backward(g_inter * t + g_prob, prob), the two sums' gradients expanded.
// A channel's index follows from the layout: c = (j / channel_stride) % C within image blockIdx.y.
__global__ void backward_kernel(const float* x, const float* t, const float* prob, const float* g_bce, float inv_n,
                                const float* g_inter, const float* g_prob, int n, int channels, int channel_stride,
                                float* out) {
  const int64_t b = blockIdx.y, base = b * n;
  const float gb = g_bce[0];
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
    const int64_t i = base + j, bc = b * channels + (j / channel_stride) % channels;
    const float target = t[i];
    const float from_bce = __fmul_rn(__fmul_rn(__fsub_rn(aten_sigmoid(x[i]), target), gb), inv_n);
    const float d_prob = __fadd_rn(__fmul_rn(g_inter[bc], target), g_prob[bc]);
    out[i] = __fadd_rn(aten_sigmoid_backward(d_prob, prob[i]), from_bce);
  }
}

bool fp32(const Tensor& t) { return t.is_cuda() && t.scalar_type() == at::kFloat; }

dim3 grid_for(const Tensor& logits) {
  const int64_t per_image = logits.numel() / logits.size(0);
  const int64_t wanted = (per_image + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(wanted, kBlocksPerImage))),
              static_cast<unsigned>(logits.size(0)));
}

// A (B, C) gradient as contiguous FP32, zeros where autograd gave none.
Tensor per_channel(const Tensor& g, const Tensor& logits) {
  if (!g.defined()) return at::zeros({logits.size(0), logits.size(1)}, logits.options());
  return g.to(at::kFloat).expand({logits.size(0), logits.size(1)}).contiguous();
}

}  // namespace

bool semantic_kernels_available(const Tensor& logits, const Tensor& target) {
  return fp32(logits) && fp32(target) && logits.dim() == 4 && logits.sizes() == target.sizes() &&
         logits.strides() == target.strides() && logits.is_non_overlapping_and_dense() &&
         logits.device() == target.device() && logits.size(0) > 0 &&
         logits.numel() / logits.size(0) < std::numeric_limits<int32_t>::max() &&
         logits.stride(0) == logits.numel() / logits.size(0);
}

SemanticMaps semantic_forward(const Tensor& logits, const Tensor& target) {
  if (!semantic_kernels_available(logits, target))
    throw std::invalid_argument("semantic term kernels: CUDA FP32 maps of one shape and layout expected");
  const c10::cuda::CUDAGuard guard(logits.device());
  SemanticMaps m{at::empty_like(logits), at::empty_like(logits), at::empty_like(logits)};
  const int n = static_cast<int>(logits.numel() / logits.size(0));
  if (n == 0) return m;
  forward_kernel<<<grid_for(logits), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      logits.data_ptr<float>(), target.data_ptr<float>(), n, m.terms.data_ptr<float>(), m.prob.data_ptr<float>(),
      m.prob_target.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return m;
}

Tensor semantic_backward(const Tensor& logits, const Tensor& target, const Tensor& prob, const Tensor& g_bce,
                         const Tensor& g_inter, const Tensor& g_prob) {
  if (!semantic_kernels_available(logits, target) || prob.strides() != logits.strides())
    throw std::invalid_argument("semantic term kernels: CUDA FP32 maps of one shape and layout expected");
  const c10::cuda::CUDAGuard guard(logits.device());
  auto out = at::empty_like(logits);
  const int n = static_cast<int>(logits.numel() / logits.size(0));
  if (n == 0) return out;
  const auto gb = g_bce.defined() ? g_bce.to(at::kFloat).reshape({1}).contiguous() : at::zeros({1}, logits.options());
  const auto gi = per_channel(g_inter, logits), gp = per_channel(g_prob, logits);
  // ATen divides by the element count as a product with its FP32 reciprocal (a host scalar).
  const float inv_n = 1.0f / static_cast<float>(logits.numel());
  backward_kernel<<<grid_for(logits), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      logits.data_ptr<float>(), target.data_ptr<float>(), prob.data_ptr<float>(), gb.data_ptr<float>(), inv_n,
      gi.data_ptr<float>(), gp.data_ptr<float>(), n, static_cast<int>(logits.size(1)),
      static_cast<int>(logits.stride(1)), out.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::loss::cuda
