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
// Host synchronisations per call: one device-to-host read of the per-image foreground counts (both
// branches together for end2end); it sizes the mask loss and the foreground gathers. Targets whose
// batch_idx lives on the CPU add none (otherwise one more, to read the per-image instance counts).
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
  double box = 7.5, cls = 0.5, dfl = 1.5;  // gains (seg and sem use the box gain)
  int64_t epochs = 100;                    // for the end2end weight schedule
  int64_t topk = 10;                       // one-to-many assigner
  int64_t o2o_topk = 7, o2o_topk2 = 1;     // one-to-one assigner
};

// nc, reg_max, strides and end2end of a built model; the rest from `base`.
LossOptions loss_options_for(const model::SegmentationModelImpl& model, LossOptions base = {});

constexpr int kLossTerms = 5;

struct BranchLoss {
  Tensor loss;   // (5) gains applied, times batch size; carries gradient
  Tensor items;  // (5) gains applied, detached
  Assignment assignment;
  int64_t num_fg = 0;
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

  LossResult operator()(const model::HeadOutputs& preds, const SegTargets& targets);

  // Names of the logged items: box_loss seg_loss cls_loss dfl_loss|l1_loss sem_loss.
  std::array<std::string, kLossTerms> item_names() const;

  // End2end weight schedule: call once after every finished epoch; set_epoch restores it on resume
  // (the number of finished epochs).
  void update_epoch();
  void set_epoch(int64_t finished_epochs);
  double one2many_weight() const { return o2m_; }
  double one2one_weight() const { return o2o_; }

  const LossOptions& options() const { return options_; }

 private:
  struct Prepared;  // a branch's decoded predictions and assignment, before the sync
  Prepared prepare(const model::BranchOutputs& branch, const std::vector<Tensor>& feats, const PaddedTargets& gt,
                   const TaskAlignedAssigner& assigner) const;
  BranchLoss finish(Prepared& p, const SegTargets& targets, const PaddedTargets& gt,
                    const std::vector<int64_t>& fg_counts) const;

  LossOptions options_;
  TaskAlignedAssigner o2m_assigner_, o2o_assigner_;
  int64_t updates_ = 0;
  double o2m_ = 0.8, o2o_ = 1.0 - 0.8;
};

// The end2end one-to-many weight after `finished_epochs` epochs of `epochs`.
double e2e_one2many_weight(int64_t finished_epochs, int64_t epochs);

}  // namespace lucid::loss
