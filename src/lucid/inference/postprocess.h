// Turning decoded model outputs into detections, as the reference's validator and predictor do:
// - non-maximum suppression over the one-to-many head (candidates above conf, multi-label rows, top
//   max_nms by confidence, class-aware through a per-class coordinate offset, greedy IoU
//   suppression with torchvision's rule, first max_det kept);
// - the end-to-end selection for the one-to-one head of an end-to-end model when nms=False (the
//   model's top-k rows, keep score > conf);
// - instance masks from prototypes and coefficients, at prototype resolution or upsampled to the
//   input, cropped to their boxes;
// - mapping boxes and masks from the letterboxed input back to the original image.
// Detections are rows [x1 y1 x2 y2 score class coef...] in input pixels.
#pragma once
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "lucid/structures/letterbox.h"
#include "lucid/util/error.h"

namespace lucid::model {
class SegmentationModelImpl;
struct HeadOutputs;
}  // namespace lucid::model

namespace lucid::engine {

using torch::Tensor;

struct NmsOptions {
  double conf = 0.001;           // candidates need a class score > conf
  double iou = 0.7;              // suppress IoU > iou
  int64_t max_det = 300;         // kept per image
  bool multi_label = true;       // one row per (box, class) above conf; only when nc > 1
  bool agnostic = false;         // no class offset
  int64_t max_nms = 30000;       // candidates entering NMS, by confidence
  double max_wh = 7680;          // class offset per class id
  int64_t nc = 0;                // classes; 0: every channel after the 4 box channels is a class
  bool xywh = true;              // input boxes are centre/size (the one-to-many decode), else xyxy
  std::vector<int64_t> classes;  // keep only these classes (empty: all)
};

// Greedy NMS: indices of kept boxes (int64, on the boxes' device) in descending score order, as
// torchvision.ops.nms (stable order for equal scores), stopping after max_keep kept boxes when
// max_keep > 0. boxes (N, 4) xyxy, scores (N).
Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold, int64_t max_keep = 0);

// prediction (B, 4 + nc + extra, A) -> per image (n, 6 + extra), FP32, on the input's device.
std::vector<Tensor> non_max_suppression(const Tensor& prediction, const NmsOptions& options);

// End-to-end rows (B, k, 6 + extra) from the model's top-k decode -> per image the rows with
// score > conf (first max_det), optionally only the given classes.
std::vector<Tensor> select_end2end(const Tensor& rows, double conf, int64_t max_det = 300,
                                   const std::vector<int64_t>& classes = {});

// The reference's nms option (8.4.190) for validation and prediction: unset (None, the default) or
// True: the one-to-many head and NMS (True embeds NMS only on export); False: the NMS-free
// one-to-one head of an end-to-end model. Whether a model with (or without) a one-to-one head
// runs through it.
bool uses_one_to_one(bool has_one_to_one, const std::optional<bool>& nms);

// The one-to-many head decoded at every anchor: (B, 4 + nc + nm, A), boxes xywh (centre, size) as
// the reference's head decodes them for NMS, also for end-to-end models; scores after the sigmoid.
Tensor one_to_many_dense(const model::SegmentationModelImpl& model, const model::HeadOutputs& out);

// Detections of a batch: the end-to-end selection of the one-to-one head when one_to_one (an
// end-to-end model), else NMS over the one-to-many decode. options.nc is taken from the model.
// The same as detections(candidates(...)), which let a caller look at the candidates in between.
std::vector<Tensor> postprocess(const model::SegmentationModelImpl& model, const model::HeadOutputs& out,
                                NmsOptions options, bool one_to_one);
// The network's candidates: the one-to-one top-k rows (B, k, 6 + nm) when one_to_one, else the
// one-to-many decode (B, 4 + nc + nm, A).
Tensor candidates(const model::SegmentationModelImpl& model, const model::HeadOutputs& out, const NmsOptions& options,
                  bool one_to_one);
// The detections of candidates (select_end2end or non_max_suppression with nc classes).
std::vector<Tensor> detections(const Tensor& candidates, NmsOptions options, bool one_to_one, int64_t nc);

// Thrown when every candidate the network outputs for a batch holds a NaN or infinite value (weights
// that pass the checks on their values, yet overflow in float32): nothing could be detected, and an
// empty result (or metrics of zero) would say there is nothing to detect. The caller names the
// model file.
class NonFiniteOutputs : public UserError {
 public:
  NonFiniteOutputs()
      : UserError(
            "every candidate the network outputs holds NaN or infinite values (its weights overflow in "
            "float32); nothing can be predicted") {}
};

// Throws NonFiniteOutputs when no candidate (a row of end-to-end rows, else a column of the dense
// decode) is finite: the one rule predict and val apply.
void require_finite_candidates(const Tensor& candidates, bool end2end);

// Zeroes mask pixels outside their boxes: keeps columns x1 <= x < x2 and rows y1 <= y < y2 (pixel
// indices compared with the box coordinates). masks (N, H, W), boxes (N, 4) in mask pixels. In place
// on masks, which are returned.
Tensor crop_mask(Tensor masks, const Tensor& boxes);

// Binary masks (N, mh, mw) uint8 at prototype resolution: coefficients (N, nm) times prototypes
// (nm, mh, mw), > 0, cropped to boxes (N, 4, input pixels of an input of size shape = {H, W}) scaled
// to the prototype grid.
Tensor process_mask(const Tensor& protos, const Tensor& coefs, const Tensor& boxes, std::array<int64_t, 2> shape);

// Binary masks (N, H, W) uint8 at input resolution (the reference's upsample=True): mask logits
// upsampled bilinearly to shape, > 0, then cropped to boxes in input pixels (cropping after the
// upsampling, so no bilinear edge spreads out of a box).
Tensor process_mask_upsampled(const Tensor& protos, const Tensor& coefs, const Tensor& boxes,
                              std::array<int64_t, 2> shape);

// Binary masks (N, h, w) uint8 at a target size shape = {h, w} (the input, or the original image
// with boxes mapped to it), as the reference's process_mask_native (8.4.190): the logits upsampled
// by the smallest factor f (1, 2 or 4) that puts the input's letterbox padding on whole pixels,
// the letterbox of shape cut out of them and resized bilinearly to shape (in chunks bounded by
// pixel count), > 0, cropped to boxes in target pixels.
Tensor process_mask_native(const Tensor& protos, const Tensor& coefs, const Tensor& boxes,
                           std::array<int64_t, 2> shape);
// The same from the mask logits (N, mh, mw) = coefficients times prototypes: each mask depends on
// its own row alone, so rows may be done a chunk at a time.
Tensor native_masks(const Tensor& logits, const Tensor& boxes, std::array<int64_t, 2> shape);

// The letterbox the reference's scale_boxes assumes without a ratio_pad: the original image of size
// orig = {h, w} fitted into an input of size input = {H, W} (one ratio, each side rounded, at least
// 1 pixel; the gains those sides over the original ones) and centred (padding round(pad - 0.1)).
structures::RatioPad fitted_letterbox(std::array<int64_t, 2> input, std::array<int64_t, 2> orig);

// Boxes (N, 4) xyxy from input pixels to original-image pixels (pad removed, divided by the gain of
// each axis, clipped to the image of size orig = {h, w}). Returns a new tensor.
Tensor scale_boxes(const Tensor& boxes, const structures::RatioPad& lb, std::array<int64_t, 2> orig);

// Masks (N, H, W) of the input to the original image, as the reference's scale_masks: the image's
// part of the input cut out (from the top/left padding, round(orig side * gain) pixels) and resized
// bilinearly to orig = {h, w}; unchanged (as FP32) when already of that size. Returns FP32 values;
// the reference's saved masks take the integer part (.byte()), drawn ones > 0.5.
Tensor scale_masks(const Tensor& masks, const structures::RatioPad& lb, std::array<int64_t, 2> orig);

// (x, y, w, h) centre boxes -> (x1, y1, x2, y2), along the last dimension.
Tensor xywh2xyxy(const Tensor& x);

}  // namespace lucid::engine
