// The segmentation training loss (the reference's v8SegmentationLoss and, for end2end heads, E2ELoss).
//
// Per branch, five terms (order and names as logged): box (CIoU), seg (per-instance mask BCE inside
// the GT box), cls (BCE on soft targets), dfl (reg_max > 1) or l1 (reg_max == 1, image-size
// normalised), sem (YOLO26 semantic BCE + Dice). Gains box / box / cls / dfl / box; the returned loss
// is the vector times the batch size, the logged items are the unscaled vector.
//
// End2end: total = w * one2many + (1 - w) * one2one, w going linearly from 0.8 (epoch 0) to 0.1 (last
// epoch); logged items are the one-to-one branch's.
//
// Precision: predictions are taken as FP32 and autocast is off inside the loss, so under BF16
// autocast the loss runs in FP32 (gradients flow back through the casts).
//
// Shapes and synchronisation: the loss runs on PaddedTargets of a fixed instance capacity M per image
// (the capacity bucket, targets.h) and every shape inside it follows from (B, M, the input size,
// Hm, Wm) alone: assignment dense over (B, M, A); box, class and DFL / L1 terms dense over all
// anchors (background weighted 0); the mask term over min(A, k * M) slots per image (k: the
// assigner's anchors per GT), foreground anchors first, the rest weighted 0; divisions by the
// foreground count are device tensors. No host read, no data-sized nonzero, no per-image loop:
// given device targets (the PaddedTargets overload) a call never synchronises with the host and can
// be recorded, once per (input shape, bucket). The SegTargets overload pads on the host first
// (free when batch_idx is a CPU tensor, one synchronisation otherwise) and uploads without blocking.
// Values do not depend on the bucket beyond rounding (the mask term's sums run over more zeros).
//
// One departure from the reference, inherent to fixed shapes: in a batch that holds instances but no
// foreground anchor at all, box predictions stay in the graph with zero gradient (the reference
// leaves them out). A batch without instances (bucket 0) keeps them out, as the reference.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "lucid/loss/assigner.h"
#include "lucid/loss/targets.h"
#include "lucid/model/heads.h"

namespace lucid::model {
class SegmentationModelImpl;
}

namespace lucid::loss {

struct LossOptions {
  int64_t nc = 80;
  int64_t reg_max = 16;
  std::vector<double> strides{8, 16, 32};
  bool end2end = false;
  bool overlap_mask = true;
  // YOLO26-seg (Segment26 head): mask-aware assignment, the reference's SegTaskAlignedAssigner
  // (assigner.h, MaskQuality); YOLOv8/11-seg assign on boxes alone.
  bool mask_assignment = false;
  double box = 7.5, cls = 0.5, dfl = 1.5;  // gains (seg and sem use the box gain)
  int64_t epochs = 100;                    // for the end2end weight schedule
  int64_t topk = 10;                       // one-to-many assigner
  int64_t o2o_topk = 7, o2o_topk2 = 1;     // one-to-one assigner
  std::vector<double> class_weights;       // cls_pw (loss/class_weights.h); empty: every class weighs 1
  int64_t min_capacity = 0;                // pad()'s least capacity for a batch with instances (capacity_floor)
  // Most mask logits (slots x pixels, all images) the mask term holds at once; bounds its memory.
  int64_t mask_chunk_elements = int64_t{1} << 24;
};

// nc, reg_max, strides, end2end and mask_assignment of a built model; the rest from `base`.
LossOptions loss_options_for(const model::SegmentationModelImpl& model, LossOptions base = {});

constexpr int kLossTerms = 5;

struct BranchLoss {
  Tensor loss;   // (5) gains applied, times batch size; carries gradient
  Tensor items;  // (5) gains applied, detached
  Assignment assignment;
  Tensor num_fg;  // () int64 foreground anchors, on the device
};

struct LossResult {
  Tensor total;  // (5) what the trainer backpropagates (after .sum())
  Tensor items;  // (5) detached, for logging
  BranchLoss one2many;
  std::optional<BranchLoss> one2one;
};

class SegmentationLoss {
 public:
  explicit SegmentationLoss(LossOptions options);

  // Targets on the predictions' device, padded to their bucket (pad, then upload or copy_targets):
  // no host synchronisation.
  LossResult operator()(const model::HeadOutputs& preds, const PaddedTargets& targets);
  // Flat targets: pad (their bucket) and upload, then the above.
  LossResult operator()(const model::HeadOutputs& preds, const SegTargets& targets);

  // The host side for this loss's mask mode: targets of a batch of `batch_size` images of
  // (height, width) pixels padded to `capacity` (-1: the batch's bucket); see pad_targets.
  PaddedTargets pad(const SegTargets& targets, int64_t batch_size, double height, double width,
                    int64_t capacity = -1) const;

  // Names of the logged items: box_loss seg_loss cls_loss dfl_loss|l1_loss sem_loss.
  std::array<std::string, kLossTerms> item_names() const;

  // End2end weight schedule: call once after every finished epoch; set_epoch restores it on resume
  // (the number of finished epochs). The weights also live in device tensors (FP32, the values a
  // host scalar would give), refilled here, so a recorded loss follows them without re-recording.
  void update_epoch();
  // time=: the epoch count the end2end schedule decays over from the next update_epoch on.
  void set_epochs(int64_t epochs) { options_.epochs = epochs; }
  void set_epoch(int64_t finished_epochs);
  double one2many_weight() const { return o2m_; }
  double one2one_weight() const { return o2o_; }

  const LossOptions& options() const { return options_; }

 private:
  struct Prepared;  // a branch's predictions as FP32 (B, A, C) and its decoded boxes
  // A branch's prototypes and semantic map in FP32, and the GT masks at the prototypes' resolution
  // with their pixel counts. The one-to-one branch's maps are the one-to-many's, detached, so the two
  // branches share one conversion and one set of GT planes.
  struct SharedMaps {
    Tensor proto, semantic, gt_masks, gt_area;
  };
  // maps: used when defined, stored (detached) when not; nullptr: converted here.
  Prepared prepare(const model::BranchOutputs& branch, const std::vector<Tensor>& feats, SharedMaps* maps) const;
  // maps: the GT planes are taken from it when defined, stored in it when not.
  MaskQuality mask_quality(const Prepared& p, const PaddedTargets& gt, SharedMaps* maps) const;
  // semantic_term: the semantic BCE + Dice term, reused when defined, stored when not (the two
  // branches share one semantic prediction); nullptr: computed here. maps: as prepare's.
  BranchLoss branch_loss(const model::BranchOutputs& branch, const std::vector<Tensor>& feats, const PaddedTargets& gt,
                         const TaskAlignedAssigner& assigner, Tensor* semantic_term = nullptr,
                         SharedMaps* maps = nullptr) const;

  LossOptions options_;
  TaskAlignedAssigner o2m_assigner_, o2o_assigner_;
  int64_t updates_ = 0;
  double o2m_ = 0.8, o2o_ = 1.0 - 0.8;
  Tensor o2m_weight_, o2o_weight_;  // on the device of the last call; undefined before it
  mutable Tensor class_weights_;    // (1, 1, nc) float on the device of the last call (cls_pw)
};

// The end2end one-to-many weight after `finished_epochs` epochs of `epochs`.
double e2e_one2many_weight(int64_t finished_epochs, int64_t epochs);

}  // namespace lucid::loss
