// Polygon geometry used by the augmentation pipeline, with the reference's semantics:
//   resample_polygon    linear resampling to a fixed point count along the vertex-index axis, every
//                       original vertex kept (ultralytics.utils.ops.resample_segments)
//   polygon_box         the polygon's extent clipped to an image: vertices inside, crossings of the
//                       image border, image corners inside the polygon (ops.segment2box)
//   point_in_polygon    +1 inside, 0 on an edge, -1 outside (cv2.pointPolygonTest without distance)
// Polygons are flat x0, y0, x1, y1, ... arrays (implicitly closed).
#pragma once
#include <vector>

#include "lucid/data/sample.h"

namespace lucid::data {

// `n` points: the closed polygon (first vertex appended) sampled at n - (L + 1) evenly spaced
// positions of the vertex index in [0, L], merged with the L + 1 integer positions (or at n evenly
// spaced positions when L + 1 >= n); a polygon that already has n points is returned as is.
std::vector<float> resample_polygon(const std::vector<float>& polygon, int n);

// Resamples every polygon of `instances` to a common count: `n`, or one more than the longest
// polygon's point count when that exceeds n (the reference's rule). Empty polygons stay empty.
void resample_polygons(SampleInstances& instances, int n = 1000);

Box polygon_box(const std::vector<float>& polygon, float width, float height);

int point_in_polygon(const std::vector<float>& polygon, float x, float y);

}  // namespace lucid::data
