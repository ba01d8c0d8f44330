// HSV jitter of a batch as tensor operations, on the CPU or on a CUDA device ("device HSV"), with
// the reference's per-image look-up tables applied in OpenCV's 8-bit HSV space:
//   RGB -> HSV as cv2.COLOR_BGR2HSV on 8 bits (H in [0, 180), integer tables with 12-bit rounding)
//   H' = (H + r_h 180) mod 180, S' = clip(S (1 + r_s), 0, 255) with S'(0) = 0,
//   V' = clip(V (1 + r_v), 0, 255)            (look-up tables truncated to uint8)
//   HSV -> RGB as cv2.COLOR_HSV2BGR on 8 bits (single-precision sector formula, rounded)
// Pixel-wise, so it commutes with the flips that follow it in the reference chain.
#pragma once
#include <torch/torch.h>

namespace lucid::data {

// The (B, 3, 256) uint8 look-up tables (hue, saturation, value) of per-image gains (B, 3).
torch::Tensor hsv_tables(const torch::Tensor& gains);

// images: (B, 3, H, W) uint8 RGB on any device; gains: (B, 3) (r_h, r_s, r_v) on the CPU. Returns
// the jittered images (same shape, dtype and device). No host synchronisation on CUDA. CPU images
// take a per-pixel loop, other devices tensor operations; both give the same bytes.
torch::Tensor hsv_augment(const torch::Tensor& images, const torch::Tensor& gains);

// The tensor-operation form on any device (what hsv_augment runs for device tensors).
torch::Tensor hsv_augment_ops(const torch::Tensor& images, const torch::Tensor& gains);

}  // namespace lucid::data
