// Prediction on images (one or a batch) as the reference's predictor does it: letterbox to imgsz with the
// minimal padding to a multiple of the stride (auto, 114 grey, bilinear resize), the model's
// detections (end-to-end top-k or NMS, conf 0.25 by default), boxes mapped back to the original
// image, and masks either from prototypes upsampled to the input and scaled back, or with
// retina_masks at the original resolution (prototype logits upsampled before cropping). Detections
// whose mask is empty are dropped, as in the reference.
#pragma once
#include <torch/torch.h>

#include <span>
#include <string>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/engine/postprocess.h"

namespace lucid::model {
class SegmentationModelImpl;
}

namespace lucid::engine {

struct PredictOptions {
  int imgsz = 640;
  double conf = 0.25;
  double iou = 0.7;
  int64_t max_det = 300;
  bool agnostic_nms = false;
  std::vector<int64_t> classes;  // keep only these (empty: all)
  bool retina_masks = false;
  bool amp = true;  // BF16 autocast on CUDA
  // Masks are brought to the original resolution a chunk of detections at a time, each chunk at
  // most this many pixels (one detection per chunk for images larger than it), so that memory
  // follows the image size, not detections x image size.
  int64_t mask_chunk_pixels = int64_t(1) << 25;
};

struct Prediction {
  int orig_h = 0, orig_w = 0;
  Tensor boxes;  // (n, 4) xyxy in original-image pixels, FP32, CPU
  Tensor conf;   // (n)
  Tensor cls;    // (n) int64
  std::vector<MaskWindow> masks;  // n windows of the original image, none empty
};

// Letterbox of one image for prediction: the padded size (multiples of `stride` around the resized
// image) and where the image sits in it.
struct PredictLetterbox {
  int height = 0, width = 0;
  Letterbox box;
};
PredictLetterbox predict_letterbox(int orig_h, int orig_w, int imgsz, int stride = 32);

Prediction predict_image(model::SegmentationModelImpl& model, const torch::Device& device, const data::Image& image,
                         const PredictOptions& options);
// The same on any network (engine/network.h: the eager model or a compiled package); options.amp is
// the network's own.
class Network;
Prediction predict_image(Network& network, const data::Image& image, const PredictOptions& options);

// Predictions of several images, in their order, each image letterboxed as predict_image does it:
// one forward for each group of images whose inputs have the same size (all of them for a video's
// frames or a camera's images). Images of other sizes are not padded to a common size, which would
// change what the network sees near their borders; so each result is predict_image's on that image.
std::vector<Prediction> predict_images(model::SegmentationModelImpl& model, const torch::Device& device,
                                       std::span<const data::Image> images, const PredictOptions& options);
std::vector<Prediction> predict_images(Network& network, std::span<const data::Image> images,
                                       const PredictOptions& options);

// The outline of the largest 8-connected region of a binary mask (h x w, nonzero = inside) as the
// pixel coordinates x0, y0, x1, y1, ... of its boundary pixels with straight runs reduced to their
// end points (as OpenCV's CHAIN_APPROX_SIMPLE). Empty when the mask is empty.
std::vector<float> mask_outline(const uint8_t* mask, int h, int w);

}  // namespace lucid::engine
