// The crop of a detection that `lucid predict save_crop=True` writes, as the reference's
// save_one_box cuts it: the box grown to 1.02 x its size plus 10 pixels about its centre, truncated
// to whole pixels and clipped to the image.
#pragma once
#include "lucid/data/image_io.h"

namespace lucid::engine {

struct CropWindow {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // [x1, x2) x [y1, y2) in image pixels; empty when x2 <= x1 or y2 <= y1
  bool empty() const { return x2 <= x1 || y2 <= y1; }
};

CropWindow detection_crop_window(float x1, float y1, float x2, float y2, int image_width, int image_height);
data::Image crop_image(const data::Image& image, const CropWindow& window);

}  // namespace lucid::engine
