// Where an image sits in a network input once letterboxed: the two forms lucid keeps. Value types
// only, below every layer that letterboxes (data), undoes it (engine) or draws on it (plot).
#pragma once

namespace lucid::structures {

// How letterbox() (data/augment.h) resized and padded one image: the resize ratio, the padding
// before the image and the resized size.
struct Letterbox {
  double ratio = 1;                  // r = min(new_h / h, new_w / w), at most 1 without scaleup
  int left = 0, top = 0;             // padding before the image
  int resized_h = 0, resized_w = 0;  // round(h r), round(w r)
};

// The same placement as the reference's ratio_pad: input x = original x * gain_w + pad_w, input y =
// original y * gain_h + pad_h, a gain per axis (each side of the image is resized and rounded on its
// own) and the left and top padding in whole input pixels.
struct RatioPad {
  double gain_h = 1.0, gain_w = 1.0;
  double pad_w = 0.0, pad_h = 0.0;
};

}  // namespace lucid::structures
