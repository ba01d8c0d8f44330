// Instance mask targets from polygons, as the reference dataloader makes them: each polygon is
// filled at the full input resolution like cv2.fillPoly (vertices truncated to int32; the polygon's
// outline drawn as 8-connected lines; the interior filled scanline by scanline from ceil(left edge)
// to floor(right edge), edges active on [y_top, y_bottom)), then reduced by `ratio` like
// cv2.resize(INTER_LINEAR) and kept 0/1. For an even ratio r an output pixel (i, j) is 1 when at
// least 2 of the full-resolution pixels (r i + r/2 - 1 .. r i + r/2, r j + r/2 - 1 .. r j + r/2) are
// set; for an odd ratio it is the pixel (r i + (r - 1) / 2, r j + (r - 1) / 2).
//
// Only the polygon's bounding window is rasterised, so the cost follows the instance's size.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "lucid/data/sample.h"

namespace lucid::data {

// cv2.fillPoly(img, [pts], color) on a dense (height, width) uint8 image; `xy` holds integer
// vertices x0, y0, x1, y1, ... (test aid and reference for the windowed path).
void fill_polygon(uint8_t* image, int height, int width, const std::vector<int32_t>& xy, uint8_t color);

// Vertices truncated toward zero, as numpy's float -> int32 cast.
std::vector<int32_t> truncate_vertices(const std::vector<float>& polygon);

// One instance's mask at 1/ratio scale, stored over the window of mask pixels it can touch.
struct InstanceMask {
  int x0 = 0, y0 = 0, width = 0, height = 0;  // window in mask pixels
  std::vector<uint8_t> bits;                  // height x width, 0/1
  int64_t area = 0;                           // set pixels
  uint8_t at(int x, int y) const {
    x -= x0;
    y -= y0;
    return (x >= 0 && y >= 0 && x < width && y < height) ? bits[size_t(y) * width + x] : 0;
  }
};

// The mask of a polygon (pixel coordinates of an image of height x width) at 1/ratio scale.
// height and width must be multiples of ratio.
InstanceMask rasterize_instance(const std::vector<float>& polygon, int height, int width, int ratio);

// Dense form of rasterize_instance: (height / ratio, width / ratio) uint8 0/1.
torch::Tensor polygon_mask(const std::vector<float>& polygon, int height, int width, int ratio);

struct MaskTargets {
  // overlap: (Hm, Wm) map, value k + 1 where the k-th instance of `order` wins (smaller instances
  // drawn last), uint8, or int32 beyond 255 instances. Otherwise (N, Hm, Wm) uint8 0/1 in instance
  // order.
  torch::Tensor masks;
  torch::Tensor sem;           // (Hm, Wm) int32 class id per pixel, 0 where no instance
  std::vector<int64_t> order;  // overlap: instance order of the map (empty-mask instances first,
                               // then area descending, ties in instance order); else identity
};

// Mask targets of one image of height x width pixels.
MaskTargets make_mask_targets(const SampleInstances& instances, int height, int width, int ratio, bool overlap);

}  // namespace lucid::data
