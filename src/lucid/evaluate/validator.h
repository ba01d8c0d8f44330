// The validator: runs a segmentation model over validation batches and computes the reference's
// box and mask metrics (metrics/detection_metrics.h), optionally the validation losses and a COCO
// results file.
//
// Per batch: images to the device, /255 (channels_last on CUDA); eval-mode forward without
// gradients, under BF16 autocast on CUDA when amp is on; losses from the raw outputs (summed, divided
// by the number of batches at the end); detections decoded in FP32 (NMS over the one-to-many decode
// by default, also for end-to-end models, as the reference's nms=None; the one-to-one head's top-k
// with score > conf with nms=False); masks from the prototypes at 1/4 input resolution (native
// resolution when a results file is written, as the reference does); per image, matching against
// the ground truth in letterboxed input space.
//
// What it prints follows the reference: the header
//   Class Images Instances Box(P R mAP50 mAP50-95) Mask(P R mAP50 mAP50-95)
// (%22s then 10 x %11s; with a batch count, the line a progress bar is drawn on), the "all" row (images, instances, 8
// numbers as %11.3g), per-class rows when verbose and nc > 1, and optionally the per-image speed line.
#pragma once
#include <array>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "lucid/inference/network.h"
#include "lucid/inference/postprocess.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/loss/targets.h"
#include "lucid/metrics/confusion_matrix.h"
#include "lucid/metrics/detection_metrics.h"
#include "lucid/metrics/val_results.h"

namespace lucid::model {
class SegmentationModelImpl;
}

namespace lucid::engine {

// One validation image's place in its batch: the original size and how it was letterboxed into the
// network input (the reference's ratio_pad: the prepared image's resize times the letterbox ratio,
// per axis, and the padding), and its file (image id of the results file: the
// file stem, as a number when it is one).
struct ValImage {
  int64_t orig_h = 0, orig_w = 0;
  structures::RatioPad letterbox;
  std::string file;
  int64_t image_id = -1;  // id in the results file (COCO data: the image's id); -1: from the file name
};

// A validation batch as the loader produces it.
struct ValBatch {
  Tensor images;               // (B, 3, H, W) uint8 RGB, any device (pinned CPU memory uploads without blocking)
  loss::SegTargets targets;    // boxes normalised to the input; masks at (H/4, W/4): an overlap map per image
                               // (values k+1) when overlap_mask, else one mask per instance
  std::vector<ValImage> info;  // B entries
};

// The reference's validator events (on_val_start, on_val_batch_start, on_val_batch_end, on_val_end).
enum class ValEvent { Start, BatchStart, BatchEnd, End };

struct ValidatorOptions {
  double conf = 0.001;
  double iou = 0.7;
  int64_t max_det = 300;
  bool agnostic_nms = false;
  bool single_cls = false;
  bool overlap_mask = true;  // layout of targets.masks
  // The reference's nms (uses_one_to_one): unset or true, the one-to-many head and NMS; false, the
  // one-to-one head of an end-to-end model.
  std::optional<bool> nms;
  bool amp = true;       // BF16 autocast for the forward pass on CUDA
  bool verbose = false;  // per-class rows (when nc > 1)
  bool speed = false;    // time the phases (synchronising the device) and print the speed line
  // Batches to come, for the progress bar drawn after the header when the log is std::cout (on a
  // terminal; util/progress.h); 0: no bar.
  int64_t batches = 0;
  // NonFiniteOutputs (inference/postprocess.h) when every candidate of a batch is NaN or infinite, as
  // predict refuses them (lucid val); training's validation scores such a batch as zeros.
  bool refuse_non_finite = false;
  std::vector<std::string> names;  // class names; empty: the class ids
  // COCO results file (written atomically at the end); empty: none. Writing it switches masks to
  // native resolution, which also changes the mask metrics, as in the reference.
  std::string save_json;
  std::vector<int64_t> class_map;  // category id per class for the results file; empty: class + 1
  // Called per image with its detections (n, 6 + nm) [x1 y1 x2 y2 score class coefs] in input pixels
  // and their binary masks (n, h, w) as matched (1/4 resolution, or input resolution with save_json).
  std::function<void(const ValImage&, const Tensor& detections, const Tensor& masks)> on_image;
  // Called per batch (number from 0) with the batch and each image's detections and masks as
  // on_image gets them (for plots of the first batches).
  std::function<void(int64_t number, const ValBatch& batch, const std::vector<Tensor>& detections,
                     const std::vector<Tensor>& masks)>
      on_batch;
  // Called at each ValEvent: Start before the header, BatchStart/BatchEnd around each batch (number
  // from 0), End after the results are printed, with them (nullptr at the other events).
  std::function<void(ValEvent event, int64_t batch, const metrics::ValResults* results)> on_event;
};

// The results type lives below the validator, with the metrics (metrics/val_results.h).
using metrics::ValResults;
using metrics::ValSpeed;

// Pulls the next batch into its argument; false when there are no more.
using ValBatchSource = std::function<bool(ValBatch&)>;

class Validator {
 public:
  explicit Validator(ValidatorOptions options = {});

  // Validates `model` on `device` (the model must already live there). The model is put in eval
  // mode and its training flag restored afterwards. With `loss`, also the validation losses. Prints
  // to `log` when given.
  ValResults run(model::SegmentationModelImpl& model, const torch::Device& device, const ValBatchSource& next,
                 loss::SegmentationLoss* loss = nullptr, std::ostream* log = nullptr);
  // Validates an exported network (deploy/load_network.h: a TorchScript file, a compiled package, a
  // file run by a registered loader) on its device: its own outputs (detection rows, or the dense
  // one-to-many layout), then the same detections, masks and scoring as for a model.
  ValResults run(Network& network, const ValBatchSource& next, std::ostream* log = nullptr);

  static std::string header();
  // The "all" row and (verbose, nc > 1) the per-class rows, one per line.
  std::string format_results(const metrics::SegmentationMetrics& m) const;
  std::string format_speed(const ValSpeed& s) const;

  const ValidatorOptions& options() const { return options_; }

 private:
  struct Pass;  // one run's running totals (validator.cpp)
  // One batch's candidates (one-to-one rows, or the dense one-to-many decode) and prototypes in FP32;
  // BatchForward computes them from the network input, charging its time (and a loss's) to the pass
  // through tick(accumulator).
  struct BatchOutputs {
    Tensor pred, proto;
    bool one_to_one = false;
  };
  using Tick = std::function<void(double&)>;
  using BatchForward =
      std::function<BatchOutputs(const Tensor& x, const ValBatch& batch, Pass& pass, const Tick& tick)>;
  ValResults run_batches(const torch::Device& device, int64_t nc, const ValBatchSource& next,
                         const BatchForward& forward, std::ostream* log);
  static void score_batch(const ValidatorOptions& o, Pass& pass, const ValBatch& batch, const std::vector<Tensor>& dets,
                          const Tensor& proto, const torch::Device& device);
  ValResults finish(Pass& pass, std::ostream* log) const;

  ValidatorOptions options_;
};

// The COCO category ids of the 80 COCO classes (1..90 with gaps).
std::vector<int64_t> coco80_to_coco91();

}  // namespace lucid::engine
