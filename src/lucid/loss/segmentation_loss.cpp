#include "lucid/loss/segmentation_loss.h"

#include "lucid/util/device.h"

#include <algorithm>
#include <numeric>

#include "lucid/loss/boxes.h"
#include "lucid/model/model.h"
#include "lucid/util/error.h"

namespace lucid::loss {

namespace F = torch::nn::functional;

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
  auto bce = F::binary_cross_entropy_with_logits(pred, target);
  auto p = pred.sigmoid();
  auto inter = (p * target).sum({2, 3});
  auto uni = p.sum({2, 3}) + target.sum({2, 3});
  auto dice = (2.0 * inter + 1) / (uni + 1);
  auto dice_loss = (1.0 - dice).mean(1).mean();
  return 0.5 * bce + 0.5 * dice_loss;
}

Tensor bce_none(const Tensor& logits, const Tensor& target) {
  return F::binary_cross_entropy_with_logits(logits, target,
                                             F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
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
  return base;
}

SegmentationLoss::SegmentationLoss(LossOptions options)
    : options_(std::move(options)),
      o2m_assigner_(AssignerOptions{.topk = options_.topk, .topk2 = options_.topk, .num_classes = options_.nc,
                                    .strides = options_.strides}),
      o2o_assigner_(AssignerOptions{.topk = options_.o2o_topk, .topk2 = options_.o2o_topk2,
                                    .num_classes = options_.nc, .strides = options_.strides}) {}

std::array<std::string, kLossTerms> SegmentationLoss::item_names() const {
  return {"box_loss", "seg_loss", "cls_loss", options_.reg_max > 1 ? "dfl_loss" : "l1_loss", "sem_loss"};
}

void SegmentationLoss::update_epoch() { set_epoch(updates_ + 1); }

void SegmentationLoss::set_epoch(int64_t finished_epochs) {
  updates_ = finished_epochs;
  if (finished_epochs == 0) {
    o2m_ = 0.8, o2o_ = 1.0 - 0.8;
    return;
  }
  o2m_ = e2e_one2many_weight(finished_epochs, options_.epochs);
  o2o_ = std::max(1.0 - o2m_, 0.0);
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
  Assignment a;
  Tensor fg_counts;  // (B) int64, on the device
};

SegmentationLoss::Prepared SegmentationLoss::prepare(const model::BranchOutputs& branch,
                                                     const std::vector<Tensor>& feats, const PaddedTargets& gt,
                                                     const TaskAlignedAssigner& assigner) const {
  Prepared p;
  const auto fl = torch::kFloat;
  p.pred_distri = branch.boxes.to(fl).permute({0, 2, 1}).contiguous();
  p.pred_scores = branch.scores.to(fl).permute({0, 2, 1}).contiguous();
  p.pred_coefs = branch.mask_coefficient.to(fl).permute({0, 2, 1}).contiguous();
  p.proto = branch.proto.to(fl);
  if (branch.semantic.defined()) p.semantic = branch.semantic.to(fl);
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

  p.a = assigner(p.pred_scores.detach().sigmoid(), p.pred_bboxes.detach() * p.stride_tensor,
                 p.anchor_points * p.stride_tensor, gt.labels, gt.boxes, gt.valid);
  p.fg_counts = p.a.fg_mask.sum(1);
  return p;
}

BranchLoss SegmentationLoss::finish(Prepared& p, const SegTargets& targets, const PaddedTargets& gt,
                                    const std::vector<int64_t>& fg_counts) const {
  const auto& a = p.a;
  const auto device = p.pred_scores.device();
  const auto fopts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const int64_t bs = p.pred_scores.size(0), na = p.pred_scores.size(1), nc = p.pred_scores.size(2);
  const int64_t num_fg = std::accumulate(fg_counts.begin(), fg_counts.end(), int64_t{0});

  auto score_sum = a.target_scores.sum().clamp_min(1);
  auto loss_cls = bce_none(p.pred_scores, a.target_scores).sum() / score_sum;
  auto zero = torch::zeros({}, fopts);
  Tensor loss_box = zero, loss_dist = zero, loss_seg = zero, loss_sem = zero;

  if (num_fg > 0) {
    // Foreground anchors as flat (image * A + anchor) indices, image-major: sized by the host-side
    // counts, so no further synchronisation.
    auto fg = torch::nonzero_static(a.fg_mask.reshape({-1}), num_fg).squeeze(1);
    auto anchor_of = fg.remainder(na);
    auto weight = a.target_scores.reshape({-1, nc}).index_select(0, fg).sum(-1, true);
    auto stride_fg = p.stride_tensor.index_select(0, anchor_of);
    auto anchors_fg = p.anchor_points.index_select(0, anchor_of);
    auto target_px = a.target_bboxes.reshape({-1, 4}).index_select(0, fg);
    auto target_grid = target_px / stride_fg;
    auto pred_box = p.pred_bboxes.reshape({-1, 4}).index_select(0, fg);

    auto iou = box_ciou_xyxy(pred_box, target_grid);
    loss_box = ((1.0 - iou) * weight).sum() / score_sum;

    const int64_t r = options_.reg_max;
    auto pred_dist = p.pred_distri.reshape({bs * na, -1}).index_select(0, fg);
    if (r > 1) {
      auto target = bbox_to_dist(anchors_fg, target_grid, static_cast<double>(r - 1)).clamp(0, r - 1 - 0.01);
      auto left = target.to(torch::kLong);
      auto right = left + 1;
      auto w_left = right - target;
      auto w_right = 1 - w_left;
      auto logp = pred_dist.view({-1, r}).log_softmax(1);
      auto dfl = -(logp.gather(1, left.view({-1, 1})).view(left.sizes()) * w_left +
                   logp.gather(1, right.view({-1, 1})).view(left.sizes()) * w_right)
                      .mean(-1, true);
      loss_dist = (dfl * weight).sum() / score_sum;
    } else {
      auto size = torch::tensor({p.width, p.height, p.width, p.height}, fopts.device(torch::kCPU));
      size = upload(size, device);
      auto target = bbox_to_dist(anchors_fg, target_grid) * stride_fg / size;
      auto pred = pred_dist * stride_fg / size;
      loss_dist = ((pred - target).abs().mean(-1, true) * weight).sum() / score_sum;
    }

    // Masks: per image, the foreground anchors' mask logits against their GT's mask, BCE summed
    // inside the GT box (at mask resolution), as a mean over the map divided by the box's
    // normalised area; then averaged over all foreground anchors.
    const int64_t expected = options_.overlap_mask ? bs : targets.size();
    if (!targets.masks.defined() || targets.masks.dim() != 3 || targets.masks.size(0) != expected)
      throw UserError("loss targets: masks must be (" + std::to_string(expected) + ", Hm, Wm) in " +
                      (options_.overlap_mask ? "overlap" : "per-instance") + " mode");
    auto masks = upload(targets.masks, device).to(torch::kFloat);
    auto proto = p.proto;
    if (masks.size(-2) != proto.size(2) || masks.size(-1) != proto.size(3))
      proto = torch::upsample_bilinear2d(proto, {masks.size(-2), masks.size(-1)}, /*align_corners=*/false);
    const int64_t mh = proto.size(2), mw = proto.size(3), nm = proto.size(1);
    auto img = upload(torch::tensor({p.width, p.height, p.width, p.height}, torch::kFloat), device);
    auto box_norm = target_px / img;
    auto area = xyxy_to_xywh(box_norm).narrow(-1, 2, 2).prod(-1);
    auto mbox = box_norm * upload(torch::tensor({mw, mh, mw, mh}, torch::kLong), device);
    auto coefs = p.pred_coefs.reshape({bs * na, -1}).index_select(0, fg);
    auto gt_idx = a.target_gt_idx.reshape({-1}).index_select(0, fg);
    auto cols = torch::arange(mw, fopts).view({1, 1, mw});
    auto rows = torch::arange(mh, fopts).view({1, mh, 1});
    Tensor seg;
    bool some_empty = false;
    for (int64_t i = 0, offset = 0; i < bs; offset += fg_counts[i], ++i) {
      const int64_t n = fg_counts[i];
      if (n == 0) {
        some_empty = true;
        continue;
      }
      auto idx = gt_idx.narrow(0, offset, n);
      Tensor gt_mask;
      if (options_.overlap_mask)
        gt_mask = (masks[i].unsqueeze(0) == (idx + 1).view({-1, 1, 1})).to(torch::kFloat);
      else
        gt_mask = masks.index_select(0, idx + gt.first[i]);
      auto logits = coefs.narrow(0, offset, n).matmul(proto[i].reshape({nm, -1})).view({n, mh, mw});
      auto bce = bce_none(logits, gt_mask);
      auto b = mbox.narrow(0, offset, n).unsqueeze(-1).unsqueeze(-1).unbind(1);  // 4 x (n, 1, 1)
      bce = bce * ((cols >= b[0]) & (cols < b[2]));
      bce = bce * ((rows >= b[1]) & (rows < b[3]));
      auto term = (bce.mean({1, 2}) / area.narrow(0, offset, n)).sum();
      seg = seg.defined() ? seg + term : term;
    }
    // Keep every prediction in the graph, as the reference does for images without foreground.
    if (some_empty) seg = seg + ((proto * 0).sum() + (p.pred_coefs * 0).sum());
    loss_seg = seg / static_cast<double>(num_fg);

    if (p.semantic.defined()) {
      if (!targets.sem_masks.defined()) throw UserError("loss targets: sem_masks required by the semantic head");
      auto sem_idx = upload(targets.sem_masks, device).to(torch::kLong).unsqueeze(1);
      Tensor present;
      if (options_.overlap_mask) {
        present = masks != 0;
      } else {
        auto bidx = upload(targets.batch_idx.reshape({-1}), device).to(torch::kLong);
        present = torch::zeros({bs, masks.size(-2), masks.size(-1)}, fopts).index_add_(0, bidx, masks) != 0;
      }
      auto sem_target = torch::zeros({bs, nc, sem_idx.size(2), sem_idx.size(3)}, fopts);
      sem_target.scatter_(1, sem_idx, present.unsqueeze(1).to(torch::kFloat));
      loss_sem = bce_dice(p.semantic, sem_target) * options_.box;
    }
  } else {
    // No foreground: mask and semantic terms are zero but keep their predictions in the graph.
    loss_seg = (p.proto * 0).sum() + (p.pred_coefs * 0).sum();
    if (p.semantic.defined()) loss_sem = (p.semantic * 0).sum();
  }

  BranchLoss out;
  auto vec = torch::stack({loss_box * options_.box, loss_seg * options_.box, loss_cls * options_.cls,
                           loss_dist * options_.dfl, loss_sem});
  out.loss = vec * static_cast<double>(bs);
  out.items = vec.detach();
  out.assignment = a;
  out.num_fg = num_fg;
  return out;
}

LossResult SegmentationLoss::operator()(const model::HeadOutputs& preds, const SegTargets& targets) {
  util::Autocast autocast_off(false);  // the loss runs in FP32
  if (preds.feats.size() != options_.strides.size())
    throw std::invalid_argument("loss: " + std::to_string(preds.feats.size()) + " feature maps for " +
                                std::to_string(options_.strides.size()) + " strides");
  if (options_.end2end && !preds.one2one) throw std::invalid_argument("loss: end2end loss needs one2one outputs");
  const auto& o2m = preds.one2many;
  const int64_t bs = o2m.scores.size(0);
  const auto device = o2m.scores.device();
  const double height = static_cast<double>(preds.feats[0].size(2)) * options_.strides[0];
  const double width = static_cast<double>(preds.feats[0].size(3)) * options_.strides[0];
  auto gt = pad_targets(targets, bs, height, width, device);

  auto first = prepare(o2m, preds.feats, gt, o2m_assigner_);
  std::optional<Prepared> second;
  if (options_.end2end) second = prepare(*preds.one2one, preds.feats, gt, o2o_assigner_);

  // The one synchronisation: per-image foreground counts of every branch, read together.
  std::vector<int64_t> c1(bs, 0), c2(bs, 0);
  if (gt.max_count() > 0) {
    auto counts = second ? torch::cat({first.fg_counts, second->fg_counts}) : first.fg_counts;
    counts = counts.to(torch::kCPU).to(torch::kLong).contiguous();
    const int64_t* c = counts.data_ptr<int64_t>();
    std::copy(c, c + bs, c1.begin());
    if (second) std::copy(c + bs, c + 2 * bs, c2.begin());
  }

  LossResult result;
  result.one2many = finish(first, targets, gt, c1);
  if (!second) {
    result.total = result.one2many.loss;
    result.items = result.one2many.items;
    return result;
  }
  result.one2one = finish(*second, targets, gt, c2);
  result.total = result.one2many.loss * o2m_ + result.one2one->loss * o2o_;
  result.items = result.one2one->items;
  return result;
}

}  // namespace lucid::loss
