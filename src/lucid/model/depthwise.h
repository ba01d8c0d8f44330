// Where a Conv's depthwise convolution runs on lucid's own CUDA kernels (model/depthwise_cuda.h)
// instead of cuDNN: on CUDA, for groups == in == out channels, stride 1, dilation 1, "same" zero
// padding, an odd square kernel up to 7 and no bias, in builds with the kernels, once the kernels
// are switched on. Under BF16 autocast the input and weight are cast as autocast casts a
// convolution's. Everywhere else (the CPU, other convolutions) the LibTorch convolution runs, so CPU
// results are unchanged.
//
// The kernels are on by default (tests/gpu/depthwise_gpu_test.cpp checks them against cuDNN; the
// screens of scripts/device-run.sh, arms default and cudnn, measure them): LUCID_DEPTHWISE_KERNELS=0
// in the environment, or set_depthwise_kernels(false), switches them off, =1 on
// (docs/performance.md). Another value is a UserError at the first convolution.
#pragma once
#include <torch/torch.h>

namespace lucid::model {

void set_depthwise_kernels(bool on);
bool depthwise_kernels_on();

// Whether conv(x) takes the depthwise kernels.
bool takes_depthwise_kernel(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// conv(x) on the depthwise kernels, with their own backward (input and weight gradients).
torch::Tensor depthwise_forward(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

}  // namespace lucid::model
