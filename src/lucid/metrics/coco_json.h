// Reading a COCO instances file (ground truth) and a results file (a list of detections) into
// CocoData, with pycocotools' conventions:
// - images are evaluated in ascending id order (integer or string ids, not mixed); categories are
//   those listed under "categories"; annotations and detections of other categories are skipped;
// - ground truth keeps its file "area" and "iscrowd" (missing iscrowd = 0); polygons are
//   rasterised at the image's height x width, uncompressed and compressed RLE are taken as given;
// - detection ids are 1 + their position in the results file; when the first result has a
//   non-empty "bbox", every result's area is its box area (and a result without "segmentation" is
//   its box as a polygon), otherwise areas (and missing boxes) come from the segmentation.
// Problems are lucid::UserError naming the file and the entry: missing or mistyped fields, image
// ids not in the ground truth, invalid RLE, duplicate ids.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>

#include "lucid/metrics/coco_eval.h"

namespace lucid::metrics {

// The most categories a COCO file may list (lucid's bound on classes): per-category results scale
// with them, so a small file listing millions would cost gigabytes.
inline constexpr size_t kMaxCocoCategories = 100000;

CocoData load_coco_eval_data(const std::string& gt_path, const std::string& results_path, IouType iou_type,
                             int threads = 0);

// The same from parsed JSON; the names are used in error messages.
CocoData coco_eval_data_from_json(const nlohmann::json& gt, const std::string& gt_name, const nlohmann::json& results,
                                  const std::string& results_name, IouType iou_type, int threads = 0);

// Parses a JSON file; throws UserError naming the file when it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path);

}  // namespace lucid::metrics
