#include "lucid/loss/segmentation_loss.h"

#include <algorithm>
#include <optional>

#include "lucid/loss/batch_reduction.h"
#include "lucid/loss/boxes.h"
#include "lucid/loss/class_bce.h"
#include "lucid/loss/mask_loss.h"
#include "lucid/loss/semantic_term.h"
#include "lucid/model/model.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/trace.h"

namespace lucid::loss {

namespace {

// Grid anchor centres (A, 2) in grid units and per-anchor strides (A, 1), FP32, P3 first.
std::pair<Tensor, Tensor> grid_anchors(const std::vector<Tensor>& feats, const std::vector<double>& strides,
                                       const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  std::vector<Tensor> points, stride_list;
  for (size_t i = 0; i < feats.size(); ++i) {
    const int64_t h = feats[i].size(2), w = feats[i].size(3);
    auto grid = torch::meshgrid({torch::arange(h, opts) + 0.5, torch::arange(w, opts) + 0.5}, "ij");
    points.push_back(torch::stack({grid[1], grid[0]}, -1).view({-1, 2}));
    stride_list.push_back(torch::full({h * w, 1}, strides[i], opts));
  }
  return {torch::cat(points), torch::cat(stride_list)};
}

// 0.5 * mean BCE + 0.5 * Dice (smooth 1, mean over classes then images); the target is
// nearest-resized to the prediction's size.
Tensor bce_dice(const Tensor& pred, Tensor target) {
  const int64_t h = pred.size(2), w = pred.size(3);
  if (target.size(2) != h || target.size(3) != w) target = torch::upsample_nearest2d(target, {h, w});
  const auto parts = semantic_parts(pred, target);
  auto uni = parts.prob_sum + target.sum({2, 3});
  auto dice = (2.0 * parts.inter + 1) / (uni + 1);
  auto dice_loss = (1.0 - dice).mean(1).mean();
  return 0.5 * parts.bce + 0.5 * dice_loss;
}

// The semantic head's target (B, nc, H, W): 1 where an instance of the class covers the pixel
// (sem_masks: each pixel's class). In the prediction's layout where the sizes agree, as the fused
// semantic kernels read it.
Tensor semantic_target(const PaddedTargets& gt, const Tensor& masks, const Tensor& prediction) {
  auto sem_idx = gt.sem_masks.to(torch::kLong).unsqueeze(1);
  auto present = gt.overlap ? masks != 0 : (masks != 0).any(1);
  const bool same_size = sem_idx.size(2) == prediction.size(2) && sem_idx.size(3) == prediction.size(3);
  const auto layout = same_size ? prediction.suggest_memory_format() : torch::MemoryFormat::Contiguous;
  auto target = torch::zeros({prediction.size(0), prediction.size(1), sem_idx.size(2), sem_idx.size(3)},
                             prediction.options().dtype(torch::kFloat).memory_format(layout));
  target.scatter_(1, sem_idx, present.unsqueeze(1).to(torch::kFloat));
  return target;
}

// (even, odd, even, odd) as a float vector made on `opts`' device by kernels alone (no host copy,
// so that it can be recorded): image or map sizes (w, h, w, h).
Tensor alternating(double even, double odd, const torch::TensorOptions& opts) {
  auto i = torch::arange(4, opts.dtype(torch::kLong));
  return torch::where(i.remainder(2) == 0, torch::scalar_tensor(even, opts), torch::scalar_tensor(odd, opts));
}

}  // namespace

double e2e_one2many_weight(int64_t finished_epochs, int64_t epochs) {
  const double initial = 0.8, final_weight = 0.1;
  const double span = static_cast<double>(std::max<int64_t>(epochs - 1, 1));
  return std::max(1.0 - static_cast<double>(finished_epochs) / span, 0.0) * (initial - final_weight) + final_weight;
}

LossOptions loss_options_for(const model::SegmentationModelImpl& model, LossOptions base) {
  base.nc = model.nc();
  base.reg_max = model.spec().reg_max;
  base.strides = model.strides();
  base.end2end = model.end2end();
  base.mask_assignment = model.head()->options().proto26;
  return base;
}

SegmentationLoss::SegmentationLoss(LossOptions options)
    : options_(std::move(options)),
      o2m_assigner_(AssignerOptions{
          .topk = options_.topk, .topk2 = options_.topk, .num_classes = options_.nc, .strides = options_.strides}),
      o2o_assigner_(AssignerOptions{.topk = options_.o2o_topk,
                                    .topk2 = options_.o2o_topk2,
                                    .num_classes = options_.nc,
                                    .strides = options_.strides}) {}

std::array<std::string, kLossTerms> SegmentationLoss::item_names() const {
  return {"box_loss", "seg_loss", "cls_loss", options_.reg_max > 1 ? "dfl_loss" : "l1_loss", "sem_loss"};
}

void SegmentationLoss::update_epoch() { set_epoch(updates_ + 1); }

void SegmentationLoss::set_epoch(int64_t finished_epochs) {
  updates_ = finished_epochs;
  if (finished_epochs == 0) {
    o2m_ = 0.8, o2o_ = 1.0 - 0.8;
  } else {
    o2m_ = e2e_one2many_weight(finished_epochs, options_.epochs);
    o2o_ = std::max(1.0 - o2m_, 0.0);
  }
  if (o2m_weight_.defined()) {
    o2m_weight_.fill_(o2m_);  // a kernel, no transfer: safe between replays
    o2o_weight_.fill_(o2o_);
  }
}

struct SegmentationLoss::Prepared {
  Tensor pred_distri;  // (B, A, 4 * reg_max)
  Tensor pred_scores;  // (B, A, nc) logits
  Tensor pred_coefs;   // (B, A, nm)
  Tensor proto;        // (B, nm, Hm, Wm)
  Tensor semantic;     // (B, nc, H/8, W/8) or undefined
  Tensor pred_bboxes;  // (B, A, 4) xyxy grid units
  Tensor anchor_points, stride_tensor;
  double height = 0, width = 0;  // network input
};

SegmentationLoss::Prepared SegmentationLoss::prepare(const model::BranchOutputs& branch,
                                                     const std::vector<Tensor>& feats, SharedMaps* maps) const {
  Prepared p;
  const auto fl = torch::kFloat;
  // (B, C, A) to FP32 (B, A, C) in one copy, the cast and the transposition together (the same
  // values, layout and gradient as a cast followed by a transposing copy). An FP32 input: `to`
  // returns the view itself, which contiguous() copies.
  auto anchors_first = [fl](const Tensor& t) {
    return t.permute({0, 2, 1})
        .to(fl, /*non_blocking=*/false, /*copy=*/false, torch::MemoryFormat::Contiguous)
        .contiguous();
  };
  p.pred_distri = anchors_first(branch.boxes);
  p.pred_scores = anchors_first(branch.scores);
  p.pred_coefs = anchors_first(branch.mask_coefficient);
  if (maps && maps->proto.defined()) {
    p.proto = maps->proto;
    p.semantic = maps->semantic;
  } else {
    // Contiguous FP32 prototypes, as the mask kernels and the mask IoUs read them: one copy from the
    // network's layout.
    p.proto = branch.proto.to(fl, /*non_blocking=*/false, /*copy=*/false, torch::MemoryFormat::Contiguous).contiguous();
    if (branch.semantic.defined()) p.semantic = branch.semantic.to(fl);
    if (maps) {
      maps->proto = p.proto.detach();
      maps->semantic = p.semantic.defined() ? p.semantic.detach() : Tensor();
    }
  }
  const auto device = p.pred_scores.device();
  std::tie(p.anchor_points, p.stride_tensor) = grid_anchors(feats, options_.strides, device);
  p.height = static_cast<double>(feats[0].size(2)) * options_.strides[0];
  p.width = static_cast<double>(feats[0].size(3)) * options_.strides[0];
  if (p.anchor_points.size(0) != p.pred_scores.size(1))
    throw std::invalid_argument("loss: feature maps give " + std::to_string(p.anchor_points.size(0)) +
                                " anchors, predictions have " + std::to_string(p.pred_scores.size(1)));

  // Decode: DFL expectation for reg_max > 1, raw distances otherwise; xyxy around the anchors.
  Tensor dist = p.pred_distri;
  const int64_t r = options_.reg_max;
  if (r > 1) {
    auto proj = torch::arange(r, torch::TensorOptions().dtype(fl).device(device));
    dist = dist.view({dist.size(0), dist.size(1), 4, r}).softmax(3).matmul(proj);
  }
  p.pred_bboxes = model::dist2bbox(dist, p.anchor_points, /*xywh=*/false, -1);
  return p;
}

MaskQuality SegmentationLoss::mask_quality(const Prepared& p, const PaddedTargets& gt, SharedMaps* maps) const {
  if (!gt.masks.defined()) throw UserError("loss targets: masks are missing");
  MaskQuality q;
  q.coefs = p.pred_coefs.detach();
  q.proto = p.proto.detach();
  q.chunk_elements = options_.mask_chunk_elements;
  const int64_t mh = q.proto.size(2), mw = q.proto.size(3), m = gt.capacity();
  q.scale = static_cast<float>(mh) / static_cast<float>(p.height);
  if (maps && maps->gt_masks.defined()) {
    q.gt_masks = maps->gt_masks;
    q.gt_area = maps->gt_area;
    return q;
  }
  // GT masks at prototype resolution (nearest, as the reference resizes them), one plane per slot.
  auto masks = gt.masks;
  const bool resize = masks.size(-2) != mh || masks.size(-1) != mw;
  if (gt.overlap) {
    auto map = masks.to(torch::kFloat).unsqueeze(0);
    if (resize) map = torch::upsample_nearest2d(map, {mh, mw});
    auto ids = torch::arange(1, m + 1, map.options()).view({1, m, 1, 1});
    q.gt_masks = map.squeeze(0).unsqueeze(1) == ids;
  } else {
    auto planes = masks.to(torch::kFloat).reshape({1, -1, masks.size(-2), masks.size(-1)});
    if (resize) planes = torch::upsample_nearest2d(planes, {mh, mw});
    q.gt_masks = planes.view({masks.size(0), m, mh, mw}) > 0.5;
  }
  if (q.gt_masks.is_cuda()) q.gt_area = q.gt_masks.flatten(2).sum(-1);  // the device IoUs' union term
  if (maps) maps->gt_masks = q.gt_masks, maps->gt_area = q.gt_area;
  return q;
}

BranchLoss SegmentationLoss::branch_loss(const model::BranchOutputs& branch, const std::vector<Tensor>& feats,
                                         const PaddedTargets& gt, const TaskAlignedAssigner& assigner,
                                         Tensor* semantic_term, SharedMaps* maps) const {
  auto p = prepare(branch, feats, maps);
  const auto device = p.pred_scores.device();
  const auto fopts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const int64_t bs = p.pred_scores.size(0), na = p.pred_scores.size(1), nc = p.pred_scores.size(2);
  const int64_t capacity = gt.capacity();

  // Stage ranges for kernel_times= (util/kernel_times.h), one after another.
  std::optional<util::TraceRange> range;
  range.emplace("assign");
  std::optional<MaskQuality> quality;
  if (options_.mask_assignment && capacity > 0) quality = mask_quality(p, gt, maps);
  auto a = assigner(p.pred_scores.detach(), p.pred_bboxes.detach() * p.stride_tensor, p.anchor_points * p.stride_tensor,
                    gt.labels, gt.boxes, gt.valid, quality ? &*quality : nullptr, ScoreForm::kLogits);
  range.reset();
  range.emplace("box and class");
  auto num_fg = a.fg_mask.sum();
  auto score_sum = a.target_scores.sum();
  Tensor batch_size;  // defined in data-parallel training: the global batch's
  if (const auto& reduce = batch_reduction()) {
    auto norms = torch::stack({num_fg.to(torch::kFloat), score_sum, torch::full({}, static_cast<double>(bs), fopts)});
    reduce(norms);
    num_fg = norms[0].round().to(torch::kLong);
    score_sum = norms[1];
    batch_size = norms[2];
  }
  score_sum = score_sum.clamp_min(1);
  auto bce = class_bce(p.pred_scores, a.target_scores);
  if (!options_.class_weights.empty()) {
    if (static_cast<int64_t>(options_.class_weights.size()) != nc)
      throw std::invalid_argument("loss: class_weights has " + std::to_string(options_.class_weights.size()) +
                                  " entries for " + std::to_string(nc) + " classes");
    // Uploaded once per device: no transfer inside a recorded step.
    if (!class_weights_.defined() || class_weights_.device() != device)
      class_weights_ =
          torch::tensor(options_.class_weights, torch::kDouble).to(torch::kFloat).view({1, 1, nc}).to(device);
    bce = bce * class_weights_;
  }
  auto loss_cls = bce.sum() / score_sum;
  auto zero = torch::zeros({}, fopts);
  Tensor loss_box = zero, loss_dist = zero, loss_seg, loss_sem = zero;

  if (capacity == 0) {
    // No instance in the batch (known on the host): box terms stay out of the graph as in the
    // reference; mask and semantic predictions stay in it with zero gradient.
    loss_seg = (p.proto * 0).sum() + (p.pred_coefs * 0).sum();
    if (p.semantic.defined()) {
      // A rank's part without instances still holds background pixels of a global batch with
      // foreground: their semantic term is the single process's.
      loss_sem = batch_size.defined() ? bce_dice(p.semantic, torch::zeros_like(p.semantic)) * options_.box *
                                            (num_fg > 0).to(torch::kFloat)
                                      : (p.semantic * 0).sum();
    }
  } else {
    // Box and distribution terms, dense over every anchor: background anchors carry weight 0
    // (their target scores are 0), and their boxes are replaced by a unit box so that no value of
    // theirs can turn the sums or gradients into NaN.
    auto fg4 = a.fg_mask.unsqueeze(-1);
    auto weight = a.target_scores.sum(-1, true);  // (B, A, 1)
    auto target_grid = a.target_bboxes / p.stride_tensor;
    auto unit = torch::arange(4, fopts).ge(2).to(torch::kFloat);  // (0, 0, 1, 1)
    auto iou = box_ciou_xyxy(torch::where(fg4, p.pred_bboxes, unit), torch::where(fg4, target_grid, unit));
    loss_box = ((1.0 - iou) * weight).sum() / score_sum;

    const int64_t r = options_.reg_max;
    if (r > 1) {
      auto target = bbox_to_dist(p.anchor_points, target_grid, static_cast<double>(r - 1)).clamp(0, r - 1 - 0.01);
      auto left = target.to(torch::kLong);
      auto right = left + 1;
      auto w_left = right - target;
      auto w_right = 1 - w_left;
      auto logp = p.pred_distri.view({-1, r}).log_softmax(1);
      auto dfl = -(logp.gather(1, left.view({-1, 1})).view(left.sizes()) * w_left +
                   logp.gather(1, right.view({-1, 1})).view(left.sizes()) * w_right)
                      .mean(-1, true);
      loss_dist = (dfl * weight).sum() / score_sum;
    } else {
      auto size = alternating(p.width, p.height, fopts);
      auto target = bbox_to_dist(p.anchor_points, target_grid) * p.stride_tensor / size;
      auto pred = p.pred_distri * p.stride_tensor / size;
      loss_dist = ((pred - target).abs().mean(-1, true) * weight).sum() / score_sum;
    }

    // Masks over fixed slots: per image min(A, k * M) of them (k: the assigner's anchors per GT, at
    // most that many foreground anchors), the image's foreground anchors first in anchor order, the
    // rest padding of weight 0. The slot of rank s is found by a search in the running count.
    range.reset();
    range.emplace("mask");
    if (!gt.masks.defined()) throw UserError("loss targets: masks are missing");
    const auto& ao = assigner.options();
    const int64_t slots = std::min(na, std::min(ao.topk, ao.topk2) * capacity);
    auto running = a.fg_mask.to(torch::kLong).cumsum(1);  // (B, A)
    auto rank = torch::arange(1, slots + 1, fopts.dtype(torch::kLong)).unsqueeze(0).expand({bs, slots}).contiguous();
    auto slot_anchor = torch::searchsorted(running, rank).clamp_max(na - 1);  // (B, K)
    auto slot_valid = rank <= running.narrow(1, na - 1, 1);
    auto masks = gt.masks;
    auto proto = p.proto;
    if (masks.size(-2) != proto.size(2) || masks.size(-1) != proto.size(3))
      proto = torch::upsample_bilinear2d(proto, {masks.size(-2), masks.size(-1)}, /*align_corners=*/false);
    const int64_t mh = proto.size(2), mw = proto.size(3), nm = proto.size(1);
    auto coefs = p.pred_coefs.gather(1, slot_anchor.unsqueeze(-1).expand({bs, slots, nm}));
    auto gt_idx = a.target_gt_idx.gather(1, slot_anchor);
    auto target_px = a.target_bboxes.gather(1, slot_anchor.unsqueeze(-1).expand({bs, slots, 4}));
    auto box_norm = target_px / alternating(p.width, p.height, fopts);
    auto area = xyxy_to_xywh(box_norm).narrow(-1, 2, 2).prod(-1);
    area = torch::where(slot_valid, area, torch::ones({}, fopts));
    auto mbox = box_norm * alternating(static_cast<double>(mw), static_cast<double>(mh), fopts);
    auto per_slot =
        cropped_mask_bce(coefs, proto, masks, gt.overlap, gt_idx, mbox, area, slot_valid, options_.mask_chunk_elements);
    loss_seg = per_slot.sum() / num_fg.clamp_min(1);

    range.reset();
    range.emplace("semantic");
    if (p.semantic.defined()) {
      if (!gt.sem_masks.defined()) throw UserError("loss targets: sem_masks required by the semantic head");
      Tensor term;
      if (semantic_term && semantic_term->defined()) {
        term = semantic_term->detach();  // the other branch's, of the same prediction and targets
      } else {
        term = bce_dice(p.semantic, semantic_target(gt, masks, p.semantic));
        if (semantic_term) *semantic_term = term;
      }
      // The reference has no semantic term for a batch without foreground.
      loss_sem = term * options_.box * (num_fg > 0).to(torch::kFloat);
    }
  }

  range.reset();
  // The semantic term is a mean over the batch's images: a rank's share is its part's mean
  // weighted by its part of the global batch.
  if (batch_size.defined() && p.semantic.defined()) loss_sem = loss_sem * (static_cast<double>(bs) / batch_size);
  BranchLoss out;
  auto vec = torch::stack(
      {loss_box * options_.box, loss_seg * options_.box, loss_cls * options_.cls, loss_dist * options_.dfl, loss_sem});
  out.loss = batch_size.defined() ? vec * batch_size : vec * static_cast<double>(bs);
  out.items = vec.detach();
  out.assignment = a;
  out.num_fg = num_fg;
  return out;
}

PaddedTargets SegmentationLoss::pad(const SegTargets& targets, int64_t batch_size, double height, double width,
                                    int64_t capacity) const {
  return pad_targets(targets, batch_size, height, width, options_.overlap_mask, capacity, options_.min_capacity);
}

LossResult SegmentationLoss::operator()(const model::HeadOutputs& preds, const SegTargets& targets) {
  if (preds.feats.empty()) throw std::invalid_argument("loss: no feature maps");
  const double height = static_cast<double>(preds.feats[0].size(2)) * options_.strides[0];
  const double width = static_cast<double>(preds.feats[0].size(3)) * options_.strides[0];
  const auto& scores = preds.one2many.scores;
  return (*this)(preds, upload(pad(targets, scores.size(0), height, width), scores.device()));
}

LossResult SegmentationLoss::operator()(const model::HeadOutputs& preds, const PaddedTargets& targets) {
  util::Autocast autocast_off(false);  // the loss runs in FP32
  if (preds.feats.size() != options_.strides.size())
    throw std::invalid_argument("loss: " + std::to_string(preds.feats.size()) + " feature maps for " +
                                std::to_string(options_.strides.size()) + " strides");
  if (options_.end2end && !preds.one2one) throw std::invalid_argument("loss: end2end loss needs one2one outputs");
  if (targets.overlap != options_.overlap_mask)
    throw std::invalid_argument("loss: targets padded for the other mask mode");
  if (targets.batch_size() != preds.one2many.scores.size(0))
    throw std::invalid_argument("loss: targets for " + std::to_string(targets.batch_size()) +
                                " images, predictions for " + std::to_string(preds.one2many.scores.size(0)));

  LossResult result;
  Tensor semantic_term;
  SharedMaps maps;
  {
    util::TraceRange range("one-to-many");
    result.one2many = branch_loss(preds.one2many, preds.feats, targets, o2m_assigner_, &semantic_term, &maps);
  }
  if (!options_.end2end) {
    result.total = result.one2many.loss;
    result.items = result.one2many.items;
    return result;
  }
  {
    util::TraceRange range("one-to-one");
    // The one-to-one head's prototypes and semantic map are the one-to-many's, detached (the
    // model's heads): they are converted once, and the semantic term is computed once.
    auto same = [](const Tensor& a, const Tensor& b) {
      return a.defined() && b.defined() && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() &&
             a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
    };
    const auto &sem = preds.one2many.semantic, &sem1 = preds.one2one->semantic;
    const bool same_semantic = same(sem, sem1);
    const bool same_maps =
        same(preds.one2many.proto, preds.one2one->proto) && (same_semantic || (!sem.defined() && !sem1.defined()));
    result.one2one = branch_loss(*preds.one2one, preds.feats, targets, o2o_assigner_,
                                 same_semantic ? &semantic_term : nullptr, same_maps ? &maps : nullptr);
  }
  const auto device = result.one2many.loss.device();
  if (!o2m_weight_.defined() || o2m_weight_.device() != device) {
    const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
    o2m_weight_ = torch::full({}, o2m_, opts);
    o2o_weight_ = torch::full({}, o2o_, opts);
  }
  result.total = result.one2many.loss * o2m_weight_ + result.one2one->loss * o2o_weight_;
  result.items = result.one2one->items;
  return result;
}

namespace {
BatchReduction& batch_reduction_slot() {
  static BatchReduction r;
  return r;
}
}  // namespace

void set_batch_reduction(BatchReduction reduce) { batch_reduction_slot() = std::move(reduce); }
const BatchReduction& batch_reduction() { return batch_reduction_slot(); }

}  // namespace lucid::loss
