// Depthwise convolution (groups == in channels == out channels, stride 1, "same" padding) as CUDA
// kernels of lucid's own. cuDNN sets up each new input shape of a depthwise convolution by compiling
// its kernels at run time: about a second per layer shape for the forward and both backward passes,
// against tens of milliseconds for a dense convolution (docs/performance.md, "A new shape's first
// pass is cuDNN's depthwise convolutions"). These kernels need no set-up. Every output element and every weight
// gradient is summed in FP32 in a fixed order that depends on the shapes alone, so two runs give the same bytes, eager
// or recorded in a CUDA graph. Built with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::model::cuda {

using at::Tensor;

// Whether the kernels take a k x k kernel (odd k up to 7) on this 4-D tensor: CUDA FP32, FP16 or
// BF16, fewer than 2^30 elements (32-bit indices).
bool depthwise_available(const Tensor& x, int64_t k);

// x (N, C, H, W) channels_last, w (C, 1, k, k) contiguous, same dtype: the stride-1 convolution
// with k / 2 zero padding, channels_last. flipped: the kernel turned by 180 degrees, which makes
// this the gradient with respect to the input when x is the output's gradient.
Tensor depthwise_conv(const Tensor& x, const Tensor& w, bool flipped);

// The gradient with respect to w (C, 1, k, k) of depthwise_conv(x, w, false), given the output's
// gradient gy (channels_last, as x): FP32 partial sums over row blocks, then each gradient's sums
// added by one warp in a fixed order (model/depthwise_math.h).
// Returned in x's dtype.
Tensor depthwise_weight_grad(const Tensor& x, const Tensor& gy, int64_t k);

}  // namespace lucid::model::cuda
