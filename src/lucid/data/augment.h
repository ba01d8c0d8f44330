// Training augmentation and validation letterboxing with the reference trainer's semantics
// (reference/yolo-seg-facts.md §6.4-6.6):
//   training:   [mosaic of 4] -> [copy_paste flip] -> random perspective to imgsz x imgsz ->
//               [copy_paste mixup] -> [mixup] -> [cutmix] -> (HSV, on the device) -> vertical flip ->
//               horizontal flip; the first four steps are the reference's pre_transform, which also
//               makes the partner images of mixup and cutmix (mix.h)
//   validation: letterbox to the batch's shape (no upscaling, centred padding)
// Every random choice comes from the sample's own counter-based streams (sample.h), keyed by
// (seed, epoch, index, purpose).
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "lucid/data/mix.h"
#include "lucid/data/sample.h"
#include "lucid/data/warp.h"
#include "lucid/structures/letterbox.h"

namespace lucid::data {

struct AugmentOptions {
  int imgsz = 640;
  double mosaic = 1.0;  // probability of the 4-image mosaic; 0 turns it off (close_mosaic)
  double degrees = 0.0, translate = 0.1, scale = 0.5, shear = 0.0, perspective = 0.0;
  double flipud = 0.0, fliplr = 0.5;
  double hsv_h = 0.015, hsv_s = 0.7, hsv_v = 0.4;
  // Mix augmentations (mix.h), off at 0; turned off with mosaic at close_mosaic.
  double mixup = 0.0, cutmix = 0.0;  // probabilities
  double copy_paste = 0.0;           // fraction of the eligible instances (mixup mode: also the probability)
  CopyPasteMode copy_paste_mode = CopyPasteMode::Flip;
  // Output height and width of the random perspective (0: imgsz): rect training's batch shape.
  int out_h = 0, out_w = 0;
  int polygon_points = 1000;  // polygons are resampled to this many points first
  uint8_t pad_value = 114;
};

// The source of prepared samples: image (long side = imgsz) and instances in its pixels.
using SampleSource = std::function<Sample(int64_t index)>;

// ---- Mosaic ------------------------------------------------------------------------------------
struct MosaicDraw {
  bool apply = false;
  int xc = 0, yc = 0;               // centre on the 2s x 2s canvas
  std::array<int64_t, 3> others{};  // indices of tiles 1..3
};
// Draws from the Mosaic stream: apply (probability p), yc and xc = int(U(s/2, 3s/2)), then three
// indices uniform over [0, dataset_size).
MosaicDraw draw_mosaic(SampleRng& rng, double p, int imgsz, int64_t dataset_size);

// Tile 0 ends at the centre (bottom-right corner there), tile 1 to its right, tile 2 below, tile 3
// diagonally; tiles are cropped at the canvas border. Labels shift with their tile, then boxes and
// polygons are clipped to the canvas and zero-area boxes dropped. The result is 2s x 2s and keeps
// tile 0's index and original size. With `window` = {x0, y0, x1, y1}, only the canvas pixels in
// [x0, x1) x [y0, y1) are written (the others are left undefined): the part a following warp reads
// (warp_affine_source_window).
Sample mosaic4(std::array<Sample, 4>&& tiles, int xc, int yc, int imgsz, uint8_t pad_value = 114,
               std::optional<std::array<int, 4>> window = std::nullopt);

// ---- Random perspective ---------------------------------------------------------------------------
struct AffineDraw {
  double perspective_x = 0, perspective_y = 0;  // P[2][0], P[2][1]
  double degrees = 0, scale = 1;                // rotation (counter-clockwise on screen) and scale
  double shear_x = 0, shear_y = 0;              // degrees
  double translate_x = 0.5, translate_y = 0.5;  // fraction of the output size
};
// Draws from the Perspective stream in the order perspective x, y, angle, scale, shear x, y,
// translate x, y (each uniform over its symmetric range).
AffineDraw draw_affine(SampleRng& rng, const AugmentOptions& o);

// M = T S R P C for an input of in_h x in_w and an output of out_h x out_w:
//   C moves the input centre to the origin, P adds the perspective terms, R rotates by `degrees`
//   and scales (cv2.getRotationMatrix2D about the origin), S shears, T moves the origin to
//   (translate_x * out_w, translate_y * out_h).
Matrix3 affine_matrix(const AffineDraw& d, int in_h, int in_w, int out_h, int out_w);

// Warps the image (bilinear, border pad_value) and the instances: polygons transformed and their
// boxes recomputed as polygon_box of the output, polygon points clipped into that box (box-only
// instances: the transformed corners' extent); boxes clipped to the output; instances kept when
// w > 2, h > 2, area / (old area * scale^2) > 0.01 (0.1 without polygons) and aspect < 100.
Sample random_perspective(Sample&& s, const Matrix3& M, double scale, int out_h, int out_w, bool perspective,
                          uint8_t pad_value = 114);

// ---- Flips -------------------------------------------------------------------------------------
// x -> W - x (horizontal) or y -> H - y (vertical) for polygons and boxes, and the image mirrored.
void flip_sample(Sample& s, bool horizontal);

// ---- Validation letterbox ---------------------------------------------------------------------
using structures::Letterbox;  // how letterbox() placed the image (structures/letterbox.h)
// Resizes (when r != 1) and pads to new_h x new_w with top = round(dh/2 - 0.1), bottom =
// round(dh/2 + 0.1) (left/right alike); instances scaled by r and shifted by (left, top).
Sample letterbox(Sample&& s, int new_h, int new_w, bool scaleup = false, uint8_t pad_value = 114,
                 Letterbox* info = nullptr);

// Rect batching of validation: images sorted by aspect ratio h / w (stable), batches of `batch`
// consecutive images, each batch's shape ceil(shape * imgsz / stride + pad) * stride with shape
// [max ar, 1] when every ar < 1, [1, 1 / min ar] when every ar > 1, else [1, 1].
struct RectPlan {
  std::vector<int64_t> order;               // dataset indices in batch order
  std::vector<std::pair<int, int>> shapes;  // (h, w) per batch
};
RectPlan rect_batches(const std::vector<std::pair<int, int>>& sizes_hw, int batch, int imgsz, int stride = 32,
                      double pad = 0.5);

// ---- HSV ---------------------------------------------------------------------------------------
// Gains r = U(-1, 1) * (hsv_h, hsv_s, hsv_v) from the Hsv stream (applied later, see hsv.h).
std::array<float, 3> draw_hsv_gains(SampleRng& rng, const AugmentOptions& o);

// ---- Pixel plans -----------------------------------------------------------------------------------
// What a training sample's pixels are made of, so that the pixel work can run apart from the
// instances: on the CPU (render_pixels, what augment_sample does) or as tensor operations on a
// device (device_augment.h). The warp reads a canvas_h x canvas_w source: the 2s x 2s mosaic, whose
// tile k covers its rectangle and lies in quadrant k about (xc, yc) (0 top-left, 1 top-right,
// 2 bottom-left, 3 bottom-right; canvas pixels outside every tile are pad), or without mosaic the
// sample's own image as the only tile (xc, yc = the canvas size, so everything is quadrant 0).
struct PixelTile {
  int64_t index = -1;                  // dataset index of the prepared image (-1: no tile)
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the canvas rectangle [x0, x1) x [y0, y1) it covers (may be empty)
  int src_x = 0, src_y = 0;            // the image pixel at canvas (x0, y0)
};
struct PixelPlan {
  int canvas_h = 0, canvas_w = 0;
  int xc = 0, yc = 0;
  int tile_count = 1;  // 4 with mosaic
  std::array<PixelTile, 4> tiles;
  Matrix3 M{};               // canvas -> output pixels
  bool perspective = false;  // warp_perspective, else warp_affine
  int out_h = 0, out_w = 0;
  bool flip_ud = false, flip_lr = false;  // after the warp, in this order
  uint8_t pad_value = 114;
};

// Whether any mix augmentation is on (then a sample is not one pixel plan: augment_sample only).
bool mixes(const AugmentOptions& o);

// A training sample's instances exactly as augment_sample makes them, and its pixel plan; the image
// is left undefined. Refuses options that mix (mixes(o)). `tile_images` receives the tiles' prepared images as the
// source gave them.
Sample plan_sample(const SampleSource& source, int64_t dataset_size, int64_t index, const AugmentOptions& o,
                   uint64_t seed, int64_t epoch, PixelPlan& plan, std::array<float, 3>* hsv_gains = nullptr,
                   std::array<torch::Tensor, 4>* tile_images = nullptr);

// The pixels of a plan on the CPU from its tiles' images (tile_images of plan_sample): mosaic canvas
// (only the window an affine warp reads), warp, flips.
torch::Tensor render_pixels(const PixelPlan& plan, const std::array<torch::Tensor, 4>& tile_images);

// ---- Whole pipelines -------------------------------------------------------------------------------
// A training sample: loads `index` (and the mosaic's other tiles) from `source`, resamples the
// polygons, then mosaic (when o.mosaic > 0), perspective, flips. `hsv_gains` receives the sample's
// HSV gains. Output imgsz x imgsz (out_h x out_w where given). Without mix augmentations the same as
// plan_sample followed by render_pixels; with them, the pre_transform (mosaic, copy_paste,
// perspective) of the sample, then mixup and cutmix with partner images made by the same
// pre_transform from streams keyed by this sample's index and the partner's role (role_purpose),
// then the flips.
Sample augment_sample(const SampleSource& source, int64_t dataset_size, int64_t index, const AugmentOptions& o,
                      uint64_t seed, int64_t epoch, std::array<float, 3>* hsv_gains = nullptr);

// A validation sample: loads `index`, resamples the polygons, letterboxes to out_h x out_w.
Sample validation_sample(const SampleSource& source, int64_t index, int out_h, int out_w, const AugmentOptions& o,
                         Letterbox* info = nullptr);

}  // namespace lucid::data
