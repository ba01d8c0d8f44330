// Image resizing as the reference resizes: OpenCV's cv2.resize with INTER_LINEAR on 8-bit images,
// reproduced to the bit (11-bit fixed-point weights, the vector path's rounding, and the switch to
// 2x2 averaging for an exact halving), plus the reference's long-side rule of load_image.
#pragma once
#include <cstdint>
#include <utility>

#include "lucid/data/image_io.h"

namespace lucid::data {

// Bilinear resize to out_width x out_height, bit-exact with cv2.resize(..., INTER_LINEAR) for uint8.
Image resize_linear(const Image& src, int out_width, int out_height);
// The same on raw HWC pixels (both sizes positive; dst holds out_height x out_width x channels).
void resize_linear(const uint8_t* src, int height, int width, int channels, uint8_t* dst, int out_height,
                   int out_width);

// The reference's load_image size: r = imgsz / max(h, w); when r != 1 the new size is
// min(ceil(w r), imgsz) x min(ceil(h r), imgsz) (down- and up-scaling alike). Returns {w, h}.
std::pair<int, int> long_side_size(int width, int height, int imgsz);

}  // namespace lucid::data
