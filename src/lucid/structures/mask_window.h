// One instance's mask at image resolution, kept as the smallest window of the image holding all of
// its pixels: a mask costs its own extent, not the whole image.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace lucid::structures {

struct MaskWindow {
  int x0 = 0, y0 = 0;    // top-left of the window in image pixels
  torch::Tensor pixels;  // (h, w) uint8 0/1, contiguous, CPU; undefined when the mask is empty
  bool empty() const { return !pixels.defined(); }
  int height() const { return empty() ? 0 : static_cast<int>(pixels.size(0)); }
  int width() const { return empty() ? 0 : static_cast<int>(pixels.size(1)); }
};

// The window of each mask of (N, H, W) uint8 masks (copied to the CPU). Empty masks have no pixels.
std::vector<MaskWindow> mask_windows(const torch::Tensor& masks);

}  // namespace lucid::structures
