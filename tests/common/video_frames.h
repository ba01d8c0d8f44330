// Synthetic video frames for the video tests: a smooth background whose blue triangle wave shifts
// 6 pixels a frame, with a bright square that moves a few pixels a frame, so that every region of
// a frame differs from its neighbours' and codecs keep the content within a few grey levels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "lucid/data/image_io.h"

namespace lucid::testing {

inline data::Image video_frame(int index, int h, int w) {
  data::Image im(h, w, 3);
  const int side = std::max(4, std::min(h, w) / 3);
  const int x0 = (index * 3) % std::max(1, w - side), y0 = (index * 2) % std::max(1, h - side);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = im.at(y, x);
      const bool in = x >= x0 && x < x0 + side && y >= y0 && y < y0 + side;
      p[0] = in ? 230 : static_cast<uint8_t>(40 + x * 120 / std::max(1, w - 1));
      p[1] = in ? 200 : static_cast<uint8_t>(60 + y * 100 / std::max(1, h - 1));
      const int phase = (x + 6 * index) % 64;
      p[2] = in ? 40 : static_cast<uint8_t>(60 + std::abs(phase - 32) * 4);
    }
  return im;
}

}  // namespace lucid::testing
