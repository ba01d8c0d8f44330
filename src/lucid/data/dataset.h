// The dataset index: per split, the usable images (path, size after EXIF orientation) and their
// instances, plus every problem found while reading them. Built once from an Ultralytics dataset
// (YAML + label .txt files) or COCO instance JSON; bad files are reported and skipped, never fatal
// unless a split ends up with no usable image.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lucid/data/fraction.h"

namespace lucid::data {

// COCO run-length encoding of a binary mask (column-major, counts alternate 0s and 1s, starting
// with 0s), in the pixel frame of the annotation (height x width).
struct Rle {
  int height = 0, width = 0;
  std::vector<uint32_t> counts;
};

using Polygon = std::vector<float>;  // x0, y0, x1, y1, ... normalised to [0, 1] by image width/height

struct Instance {
  int cls = 0;
  std::vector<Polygon> polygons;  // empty for box-only labels and RLE masks; several for multi-part COCO
  std::array<float, 4> box{};     // normalised cx, cy, w, h (the polygons' extent when there are any)
  bool crowd = false;             // COCO iscrowd: kept for evaluation, not used as a training target
  std::optional<Rle> rle;         // mask given as RLE (COCO)
};

struct ImageRecord {
  std::string path;
  int width = 0, height = 0;  // after the EXIF orientation (what decode_image returns)
  std::vector<Instance> instances;
  std::string label_path;  // Ultralytics: the label file (may not exist = background)
  int64_t coco_id = -1;    // COCO: the image id
  std::string file_name;   // COCO: file_name as written in the JSON
};

struct Problem {
  std::string path;
  int line = 0;  // 1-based; 0 when the problem is not tied to a line
  std::string message;
  std::string str() const;  // "path:line: message"
};

struct SplitCounts {
  int64_t images = 0;              // usable images
  int64_t instances = 0;           // non-crowd instances of usable images
  int64_t crowd = 0;               // crowd instances (COCO)
  int64_t box_only = 0;            // instances without a polygon or RLE
  int64_t backgrounds = 0;         // usable images without non-crowd instances
  int64_t skipped = 0;             // image files skipped (corrupt image or label, missing image)
  int64_t orphan_labels = 0;       // label files without an image
  int64_t duplicates_removed = 0;  // duplicate label rows removed
};

struct Split {
  std::string name;    // train, val, test, or a folder name
  std::string source;  // the folder, list file or JSON it came from
  std::vector<ImageRecord> images;
  SplitCounts counts;
  std::vector<Problem> problems;
};

enum class DatasetFormat { Ultralytics, Coco };

struct DatasetIndex {
  std::string source;  // the YAML, folder or JSON given
  DatasetFormat format = DatasetFormat::Ultralytics;
  std::vector<std::string> names;     // class names, index = class id
  std::vector<int64_t> category_ids;  // COCO: category id of each class index (empty otherwise)
  std::vector<Split> splits;

  const Split* find(const std::string& name) const;
  int nc() const { return int(names.size()); }
};

struct IndexOptions {
  // Decode every image fully (catches corrupt pixel data, slower); otherwise only headers are read
  // and a JPEG is decoded only when its end marker is missing.
  bool decode = false;
  // Throw a UserError when a split has no usable image (data check turns this off to report).
  bool require_images = true;
  // Override COCO image folder (data=FILE.json only).
  std::string coco_images;
  // Follow COCO file_name values that are absolute or lead out of the image folder with "..";
  // otherwise such images are reported and skipped (option allow_outside_images).
  bool allow_outside_images = false;
  // The part of each split's sorted image list to index (option fraction): the rest is left out
  // before its files are read.
  DatasetFraction fraction;
  // Every class becomes class 0 of one class named "item" (option single_cls): label classes are
  // then not checked against the dataset's names, as the reference's verify_image_label.
  bool single_cls = false;
  // The most entries a split folder's walk may visit (folder links are followed, once each); beyond
  // it the index is refused with an error naming the folder.
  int64_t max_folder_entries = 10'000'000;
  // Called for each problem as it is found (besides recording it in the split).
  std::function<void(const Problem&)> on_problem;
};

// `data` is a dataset YAML, a folder (holding one YAML, or an images/ + labels/ tree with
// classes.txt), or a COCO instances JSON file.
DatasetIndex build_index(const std::string& data, const IndexOptions& options = {});

// The reference's label path rule: the last "/images/" of the image path becomes "/labels/" and the
// extension becomes ".txt" (so without an images/ folder the label sits beside the image).
std::string label_path_for(const std::string& image_path);

// Image file extensions listed from folders (the reference's set; only JPEG and PNG content decodes,
// other formats are reported and skipped).
bool has_image_extension(const std::string& path);

// Box (normalised cx, cy, w, h) of polygons: the extent of all points, in float32 as the reference.
std::array<float, 4> polygon_box(const std::vector<Polygon>& polygons);

}  // namespace lucid::data
