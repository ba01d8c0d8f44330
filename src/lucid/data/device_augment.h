// The training augmentation's pixel work (4-tile mosaic, random perspective / affine warp, flips)
// as tensor operations that run on the CPU and on a CUDA device ("gpu_augment"): loader workers
// keep the instances and mask targets (plan_sample) and the device renders the images from the
// prepared set held in its memory, so a GPU machine's training is not bound by its CPU cores.
//
// Every output pixel is computed on its own, without a mosaic canvas: its position before the
// flips, its source position on the canvas through the inverse map, the four neighbours of its
// bilinear cell, each read from the tile of its canvas quadrant (pad 114 outside every tile and
// outside the canvas), and the blend; a batch is a fixed sequence of about 80 elementwise and gather
// operations over all its pixels, whatever B. The arithmetic is warp.cpp's reproduction of OpenCV's:
// inverse map in single precision, products and sums rounded to single where OpenCV rounds them,
// single-precision fused multiply-adds emulated as warp.cpp emulates them (an exact double product,
// a double sum, rounded to single), the affine row's vector/tail order, rounding half to even.
// Hence the bytes equal augment_sample's (render_pixels) exactly, not within a tolerance: the unit
// and GPU tests compare them byte for byte with mosaic on and off, affine and perspective maps and
// flips, and bench_loader --pixels device compares its first 64 images of a real dataset at 640.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "lucid/data/augment.h"

namespace lucid::data {

// The prepared images of a dataset in one device buffer, uploaded once: 4 bytes per pixel (R, G, B
// and a zero byte) so that a neighbour is a single 32-bit read.
class DeviceImages {
 public:
  // The images of samples 0..size-1 of `source` (uint8 HWC, 3 channels).
  DeviceImages(const SampleSource& source, int64_t size, const torch::Device& device);
  torch::Device device() const { return pixels_.device(); }
  int64_t size() const { return int64_t(height_.size()); }
  uint64_t bytes() const { return uint64_t(pixels_.numel()) * 4; }  // device memory held
  int height(int64_t i) const { return height_.at(size_t(i)); }
  int width(int64_t i) const { return width_.at(size_t(i)); }
  int64_t offset(int64_t i) const { return offset_.at(size_t(i)); }  // first pixel of image i
  const torch::Tensor& pixels() const { return pixels_; }            // (P) int32: R | G << 8 | B << 16

 private:
  torch::Tensor pixels_;
  std::vector<int64_t> offset_;
  std::vector<int> height_, width_;
};

// The (B, 3, H, W) uint8 RGB images of `plans` (one output size) on images.device(): for each plan
// the bytes of render_pixels. No host synchronisation on CUDA (the plans go up as one pinned,
// non-blocking copy).
torch::Tensor render_batch(const DeviceImages& images, const std::vector<PixelPlan>& plans);

}  // namespace lucid::data
