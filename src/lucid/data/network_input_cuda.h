// network_input.h as one CUDA kernel: per pixel, OpenCV's 8-bit HSV round trip through the image's
// look-up tables (the arithmetic of hsv.cpp's pixel loop, rounding step for rounding step), then
// the three channels scaled by 1/255 as ATen's division by a scalar does (a product with the FP32
// reciprocal), written channels-last. Built with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::data::cuda {

// images (B, 3, H, W) uint8, contiguous, CUDA; luts (B, 3, 256) uint8 on the same device (hsv_tables)
// or undefined for no jitter. Returns (B, 3, H, W) FP32 in channels-last memory: `out` where given
// (that shape and layout on the images' device), else a new tensor.
at::Tensor network_input(const at::Tensor& images, const at::Tensor& luts, const at::Tensor& out = {});

}  // namespace lucid::data::cuda
