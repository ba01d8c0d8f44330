#include "lucid/predict/detection_crop.h"

#include <algorithm>
#include <cstring>

namespace lucid::engine {

CropWindow detection_crop_window(float x1, float y1, float x2, float y2, int image_width, int image_height) {
  // In float32 as the reference's tensors, then truncated toward zero (its .long()) and clipped.
  const float cx = (x1 + x2) / 2, cy = (y1 + y2) / 2;
  const float w = (x2 - x1) * 1.02f + 10, h = (y2 - y1) * 1.02f + 10;
  auto clip = [](float v, int hi) { return std::clamp(static_cast<int>(v), 0, hi); };
  return {clip(cx - w / 2, image_width), clip(cy - h / 2, image_height), clip(cx + w / 2, image_width),
          clip(cy + h / 2, image_height)};
}

data::Image crop_image(const data::Image& image, const CropWindow& win) {
  if (win.empty()) return {};
  data::Image out(win.y2 - win.y1, win.x2 - win.x1, image.channels);
  const size_t row = static_cast<size_t>(out.width) * image.channels;
  for (int y = 0; y < out.height; ++y) std::memcpy(out.at(y, 0), image.at(win.y1 + y, win.x1), row);
  return out;
}

}  // namespace lucid::engine
