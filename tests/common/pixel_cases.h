// Augmentation settings under which the device-pixel tests compare render_batch with augment_sample.
#pragma once
#include "lucid/data/augment.h"

namespace lucid::test_support {

struct PixelCase {
  const char* name;
  double mosaic, degrees, shear, perspective;
  int imgsz;

  // Both flips drawn at 1/2, polygons resampled to `polygon_points`.
  data::AugmentOptions options(int polygon_points = 1000) const {
    data::AugmentOptions o;
    o.imgsz = imgsz;
    o.mosaic = mosaic;
    o.degrees = degrees;
    o.shear = shear;
    o.perspective = perspective;
    o.flipud = 0.5;
    o.polygon_points = polygon_points;
    return o;
  }
};

}  // namespace lucid::test_support
