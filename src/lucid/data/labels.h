// Label parsers, independent of the file system so they can be tested and fuzzed on strings:
// Ultralytics label text (one instance per line) and COCO instance JSON, plus COCO RLE and the
// polygon helpers both formats share.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "lucid/metrics/rle.h"

#include "lucid/data/dataset.h"

namespace lucid::data {

// ---- Ultralytics label text --------------------------------------------------------------------
// Lines `cls x1 y1 ... xn yn` (polygon) or `cls cx cy w h` (box); a file with any line of more than
// 6 tokens is read as polygons throughout, as the reference does. Checks follow the reference's
// verify_image_label: each row's class and box (cx, cy, w, h; for polygons their extent) within
// [-0.01, 1.01], class an integer in [0, nc), exact duplicate rows (class + box) removed with the
// remaining rows in sorted order. Any other problem makes the whole file unusable (ok = false) and
// its image is skipped, as the reference skips it. Blank lines are ignored.
// The most instances one image may hold (label rows, or COCO annotations of one image): each costs
// memory and time in every batch it joins (a label file of 100,000 polygons trained in 7.1 GB and
// 119 s), and real datasets stay far below (COCO's most crowded image has under 100 instances,
// SKU-110K's densest shelves under 1,000). An image over the cap is skipped with a warning naming
// the file and the count.
inline constexpr size_t kMaxInstancesPerImage = 5000;

struct LabelParse {
  bool ok = true;
  std::vector<Instance> instances;
  std::vector<Problem> problems;  // warnings (also when ok) and, when !ok, the reason
  int duplicates_removed = 0;
};

LabelParse parse_yolo_labels(std::string_view text, int nc, const std::string& path);

// Writes one instance as a label line (polygon if it has exactly one part, box otherwise), with
// `digits` decimals.
std::string format_yolo_line(int cls, const Polygon* polygon, const std::array<float, 4>& box, int digits = 6);

// ---- COCO --------------------------------------------------------------------------------------
struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int width = 0, height = 0;
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
};

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  bool iscrowd = false;
  std::vector<std::vector<double>> polygons;  // pixel coordinates, one vector per part
  std::optional<Rle> rle;
  std::optional<std::array<double, 4>> bbox;  // x, y, w, h in pixels
};

struct CocoFile {
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;  // sorted by id
  std::vector<CocoAnnotation> annotations;
  std::vector<Problem> problems;  // entries dropped, each with the reason
};

// Parses and validates the structure. Throws UserError (naming `path`) when the text is not JSON
// or lacks the images/annotations/categories arrays; single bad entries are dropped and reported.
CocoFile parse_coco_json(std::string_view text, const std::string& path);

// COCO's compressed RLE string (as pycocotools writes it) to counts and back.
// COCO's compressed counts strings, shared with the evaluation code (throws UserError on bad input).
using metrics::rle_counts_from_string;
using metrics::rle_counts_to_string;
int64_t rle_area(const Rle& rle);
// Bounding box (x, y, w, h in pixels) of the set pixels; zeros when empty.
std::array<double, 4> rle_bbox(const Rle& rle);

// Outline of a mask as one polygon (x, y in pixels of the RLE's frame, pixel centres): the outer
// boundary of each 8-connected region (Moore-neighbour tracing, clockwise on screen, straight runs
// reduced to their ends as cv2.CHAIN_APPROX_SIMPLE), regions in raster order of their first pixel,
// several regions joined as merge_polygon_parts joins polygon parts. Holes are not traced (the
// outline covers them). Empty for an empty mask.
std::vector<double> rle_outline(const Rle& rle);

// ---- polygons ----------------------------------------------------------------------------------
double polygon_area(const std::vector<double>& xy);  // shoelace, absolute
// Joins the parts of a multi-part polygon into one outline by linking each part to the next at the
// closest pair of vertices and walking the links there and back (the reference converter's rule).
std::vector<double> merge_polygon_parts(const std::vector<std::vector<double>>& parts);

// The instances left once exact duplicates are removed, as the reference's label check (8.4.190):
// rows (class, box) equal; where polygons are given, only rows whose (class, points) are equal too.
// Returns the indices kept in the order numpy's unique yields them (sorted keys, first occurrence of
// each), or all in the given order when none is a duplicate.
std::vector<size_t> unique_instances(const std::vector<Instance>& instances);

}  // namespace lucid::data
