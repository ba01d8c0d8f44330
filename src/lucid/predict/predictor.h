// Prediction on images (one or a batch) as the reference's predictor does it (8.4.190): letterbox to
// imgsz with the minimal padding to a multiple of the stride (auto, 114 grey, bilinear resize), the
// model's detections (NMS over the one-to-many head by default, the one-to-one head's top-k with
// nms=False; conf 0.25 by default), boxes mapped back to the original image with the gain of each
// axis (scale_boxes without ratio_pad), and masks either from prototype logits upsampled to the
// input, cropped there and scaled back as the reference draws them (scale_masks, > 0.5), or with
// retina_masks at the original resolution (process_mask_native). Detections whose mask is empty are
// dropped, as in the reference.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/inference/postprocess.h"
#include "lucid/structures/mask_window.h"
#include "lucid/util/error.h"

namespace lucid::model {
class SegmentationModelImpl;
}

namespace lucid::engine {

// The network input a prediction letterboxes to, height by width: imgsz=640 is 640 x 640, the
// reference's imgsz=[480, 640] is 480 high and 640 wide (LetterBox(new_shape=(h, w))).
struct InputSize {
  int h = 640, w = 640;
  InputSize() = default;
  InputSize(int side) : h(side), w(side) {}  // NOLINT(google-explicit-constructor): a square imgsz
  InputSize(int height, int width) : h(height), w(width) {}
  int max_side() const { return std::max(h, w); }
  bool operator==(const InputSize&) const = default;
};

struct PredictOptions {
  InputSize imgsz = 640;
  double conf = 0.25;
  double iou = 0.7;
  int64_t max_det = 300;
  bool agnostic_nms = false;
  std::vector<int64_t> classes;  // keep only these (empty: all)
  bool retina_masks = false;
  bool amp = true;  // BF16 autocast on CUDA
  // The reference's nms (uses_one_to_one): unset or true, the one-to-many head and NMS; false, the
  // one-to-one head of an end-to-end model.
  std::optional<bool> nms;
  // Masks are made and brought to the original resolution a chunk of detections at a time, each
  // chunk at most this many pixels of the image or of the mask planes, whichever is larger (one
  // detection per chunk beyond it), so that memory follows the image size, not detections x size.
  int64_t mask_chunk_pixels = int64_t(1) << 25;
};

struct Prediction {
  int orig_h = 0, orig_w = 0;
  Tensor boxes;                               // (n, 4) xyxy in original-image pixels, FP32, CPU
  Tensor conf;                                // (n)
  Tensor cls;                                 // (n) int64
  std::vector<structures::MaskWindow> masks;  // n windows of the original image, none empty
};

// Letterbox of one image for prediction into imgsz (h x w; the ratio the smaller of h / orig_h and
// w / orig_w): the padded size (multiples of `stride` around the resized image; a stride of at
// least imgsz's larger side pads to the full imgsz), the ratio, the resized size and the padding of
// each side (halves of the total; the left and top sides get round(pad - 0.1) pixels).
struct PredictLetterbox {
  int height = 0, width = 0;
  double ratio = 1.0;
  int resized_h = 0, resized_w = 0;
  double pad_w = 0.0, pad_h = 0.0;
};
PredictLetterbox predict_letterbox(int orig_h, int orig_w, InputSize imgsz, int stride = 32);

Prediction predict_image(model::SegmentationModelImpl& model, const torch::Device& device, const data::Image& image,
                         const PredictOptions& options);
// The same on any network (inference/network.h: the eager model or a compiled package); options.amp and
// options.nms are the network's own.
class Network;
Prediction predict_image(Network& network, const data::Image& image, const PredictOptions& options);

// Predictions of several images, in their order, letterboxed as the reference's predictor letterboxes
// a batch (batch_pad_multiple): images of one size (a video's frames, a camera's images) with the
// minimal padding, each result predict_image's on that image; images of different sizes each to
// the full imgsz (h x w), so that the batch is one forward.
std::vector<Prediction> predict_images(model::SegmentationModelImpl& model, const torch::Device& device,
                                       std::span<const data::Image> images, const PredictOptions& options);
// Milliseconds of a batch by stage, as the reference reports them: letterbox and upload
// (preprocess), the network (inference: the device is waited for), detections and masks
// (postprocess).
struct PredictTimes {
  double preprocess = 0, inference = 0, postprocess = 0;
};
std::vector<Prediction> predict_images(Network& network, std::span<const data::Image> images,
                                       const PredictOptions& options, PredictTimes* times = nullptr);

// The postprocess of one image run on synthetic candidates, 1 to 128 small boxes that suppress none
// of each other, over the network's outputs for `images`: each kernel NMS and the masks launch, and
// each of cuBLAS's kernels for the mask products' sizes, loaded on the device before an image needs
// it (CUDA loads a kernel at its first launch: 50-150 ms at the first image with detections).
void warm_postprocess(Network& network, std::span<const data::Image> images, const PredictOptions& options);

// The multiple a batch's letterboxes are padded to: the network's (its stride, or a fixed input's
// size) when every image has the same size, else imgsz's larger side, the full imgsz (the reference's
// LetterBox(auto=same_shapes)).
int batch_pad_multiple(const Network& network, std::span<const data::Image> images, InputSize imgsz);

// The input a batch of images of these sizes (height, width) is predicted at: (height, width) of
// its letterboxes.
std::pair<int, int> batch_input_shape(const Network& network, std::span<const std::pair<int, int>> sizes,
                                      InputSize imgsz);

// The top-k predict_images asks of an end-to-end network: at least 300 candidates, as the reference's
// predictor sets it, so that classes= filters before the max_det cut.
inline int64_t network_top_k(const PredictOptions& o) { return std::max<int64_t>(o.max_det, 300); }

// NonFiniteOutputs (inference/postprocess.h) is thrown by predict_images when every candidate the
// network outputs for a batch holds a NaN or infinite value.

// The outline of the largest 8-connected region of a binary mask (h x w, nonzero = inside) as the
// pixel coordinates x0, y0, x1, y1, ... of its boundary pixels with straight runs reduced to their
// end points (as OpenCV's CHAIN_APPROX_SIMPLE). Empty when the mask is empty.
std::vector<float> mask_outline(const uint8_t* mask, int h, int w);

// The outer boundary of every 8-connected region that lies in no other region's hole, each traced as
// mask_outline traces one, listed in the order OpenCV's findContours(RETR_EXTERNAL,
// CHAIN_APPROX_SIMPLE) lists them (the region whose first pixel comes last in raster order first),
// with the same points; what the reference's Masks.xy merges into one polygon per mask.
std::vector<std::vector<float>> mask_contours(const uint8_t* mask, int h, int w);

}  // namespace lucid::engine
