// Run-length encoded binary masks in the COCO layout: pixels in column-major order (down each
// column, then across), runs alternate starting with zeros, so a mask starting with a foreground
// pixel has counts[0] == 0. The arithmetic (polygon rasterisation, bounding boxes, IoU, the
// compressed string form) follows the COCO mask API bit for bit, so areas, boxes and IoUs agree
// exactly with pycocotools.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lucid::metrics {

struct Rle {
  uint32_t h = 0;
  uint32_t w = 0;
  std::vector<uint32_t> counts;  // sums to h * w for a valid mask
};

// Box as COCO writes it: x, y, width, height.
using BoxXywh = std::array<double, 4>;

// Encode a binary mask (nonzero = foreground) given row-major (h rows of w pixels, the usual
// image layout) or column-major (COCO/Fortran layout).
Rle rle_encode(const uint8_t* mask, uint32_t h, uint32_t w);
Rle rle_encode_column_major(const uint8_t* mask, uint32_t h, uint32_t w);
// The mask of an h x w image that is empty outside a window: `window` row-major (wh rows of ww
// pixels) with its top-left at (x0, y0). Equals rle_encode of the whole image's mask.
Rle rle_encode_window(const uint8_t* window, uint32_t wh, uint32_t ww, uint32_t x0, uint32_t y0, uint32_t h,
                      uint32_t w);
// Decode to 0/1 bytes, row-major or column-major. The RLE must be valid (see rle_validate).
std::vector<uint8_t> rle_decode(const Rle& rle);
std::vector<uint8_t> rle_decode_column_major(const Rle& rle);

// Throws lucid::UserError describing the problem when counts do not sum to h * w.
void rle_validate(const Rle& rle);

uint64_t rle_area(const Rle& rle);
// Tight box of the foreground ([0,0,0,0] when empty), computed as the COCO API does: a run that
// wraps from one column to the next widens the box to the full image height.
BoxXywh rle_bbox(const Rle& rle);

// Rasterise one polygon (x0, y0, x1, y1, ...; pixel coordinates) at image size h x w, with the
// COCO API's rule (boundary upsampled 5x, pixel centres). An odd trailing coordinate is ignored.
Rle rle_from_polygon(const double* xy, size_t n_coords, uint32_t h, uint32_t w);
inline Rle rle_from_polygon(const std::vector<double>& xy, uint32_t h, uint32_t w) {
  return rle_from_polygon(xy.data(), xy.size(), h, w);
}
// Rasterise a box the way the COCO API does (as the polygon of its corners).
Rle rle_from_box(const BoxXywh& box, uint32_t h, uint32_t w);
// Union (or intersection) of masks of equal size. Size mismatch gives an empty 0 x 0 RLE, as in
// the COCO API; zero masks give 0 x 0 as well.
Rle rle_merge(const std::vector<Rle>& rles, bool intersect = false);
// The usual COCO object: several polygon parts merged into one mask.
Rle rle_from_polygons(const std::vector<std::vector<double>>& polygons, uint32_t h, uint32_t w);

// COCO's compressed counts string (6 bits per character, ASCII 48..111, counts after the third
// stored as differences to the count two places back). from_string throws lucid::UserError for
// characters outside that range, a truncated final value, negative counts or counts not summing to
// h * w.
std::string rle_to_string(const Rle& rle);
// The counts alone (COCO's compressed string form, no size check), both ways.
std::string rle_counts_to_string(const std::vector<uint32_t>& counts);
std::vector<uint32_t> rle_counts_from_string(std::string_view s);
Rle rle_from_string(std::string_view s, uint32_t h, uint32_t w);

// IoU of two masks; when `crowd` the union is the area of `dt` alone (COCO's rule for crowd ground
// truth). Masks of different sizes give -1 when their boxes overlap and 0 otherwise (as the COCO
// API does). Empty masks give 0.
double rle_iou(const Rle& dt, const Rle& gt, bool crowd);
// IoU of boxes (x, y, w, h); crowd: union = area of `dt`.
double box_iou(const BoxXywh& dt, const BoxXywh& gt, bool crowd);

// All pairs, row-major [d * gts.size() + g]; crowd has one flag per ground truth (or is empty for
// no crowds). Boxes of the masks are computed once and pairs whose boxes do not overlap are
// skipped.
std::vector<double> rle_iou_matrix(const std::vector<const Rle*>& dts, const std::vector<const Rle*>& gts,
                                   const std::vector<uint8_t>& crowd);
std::vector<double> box_iou_matrix(const std::vector<BoxXywh>& dts, const std::vector<BoxXywh>& gts,
                                   const std::vector<uint8_t>& crowd);

}  // namespace lucid::metrics
