// The network's input from a batch of uint8 images on the training device: the optional device HSV
// jitter (hsv.h), then x / 255 in FP32, channels-last on CUDA. On CUDA one fused kernel
// (network_input_cuda.h) reads each pixel once and writes the FP32 planes; it gives the bytes of
// the tensor-operation form, which runs everywhere else.
#pragma once
#include <torch/torch.h>

namespace lucid::data {

// images: (B, 3, H, W) uint8 on the device; gains: (B, 3) HSV gains on the CPU, or undefined for no
// jitter. No host synchronisation on CUDA. out: where to write the result ((B, 3, H, W) FP32, laid
// out as the result is), or undefined for a new tensor.
torch::Tensor network_input(const torch::Tensor& images, const torch::Tensor& gains, const torch::Tensor& out = {});

// The tensor-operation form: hsv_augment, then .to(FP32).div_(255), channels-last on CUDA.
torch::Tensor network_input_ops(const torch::Tensor& images, const torch::Tensor& gains);

}  // namespace lucid::data
