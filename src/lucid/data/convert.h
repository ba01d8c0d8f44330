// Writing an indexed dataset in either format, as a self-contained folder (images hard-linked, or
// copied where linking is impossible):
//   Ultralytics: images/<split>/..., labels/<split>/....txt, data.yaml
//   COCO:        images/<split>/..., annotations/instances_<split>.json, data.yaml (json + images)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lucid/data/dataset.h"

namespace lucid::data {

struct ConvertReport {
  int64_t images = 0, instances = 0;
  int64_t crowd_dropped = 0;      // to Ultralytics: crowd annotations have no place in label files
  int64_t rle_as_box = 0;         // to Ultralytics: non-crowd RLE masks written as boxes
  int64_t parts_merged = 0;       // to Ultralytics: multi-part polygons joined into one outline
  int64_t boxes_as_polygons = 0;  // to Ultralytics: boxes in a polygon label file, as 4 corners
  int64_t degenerate_as_box = 0;  // to COCO: outlines of fewer than 3 points written as boxes
  std::vector<std::string> notes;
};

ConvertReport write_ultralytics(const DatasetIndex& index, const std::string& out_dir);
ConvertReport write_coco(const DatasetIndex& index, const std::string& out_dir);

}  // namespace lucid::data
