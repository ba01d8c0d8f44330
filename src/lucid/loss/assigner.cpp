#include "lucid/loss/assigner.h"

#include <algorithm>

#include "lucid/loss/boxes.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/assigner_cuda.h"
#include "lucid/loss/mask_iou_cuda.h"
#include "lucid/loss/top_candidates_cuda.h"
#endif

namespace lucid::loss {

TaskAlignedAssigner::TaskAlignedAssigner(AssignerOptions options) : options_(std::move(options)) {
  if (options_.topk2 <= 0) options_.topk2 = options_.topk;
  if (options_.strides.empty()) options_.strides = {8, 16, 32};
}

Tensor TaskAlignedAssigner::widened_boxes(const Tensor& gt_bboxes, const Tensor& mask_gt) const {
  // Small-object expansion: a GT side shorter than the second stride becomes that stride, around the
  // same centre. Every GT goes through xywh and back, as in the reference (rounding).
  const double widened = options_.strides.size() > 1 ? options_.strides[1] : options_.strides[0];
  const double small = widened;
  auto xywh = xyxy_to_xywh(gt_bboxes);
  auto wh = xywh.narrow(-1, 2, 2);
  auto expand = ((wh < small) * mask_gt).to(torch::kBool);
  wh = torch::where(expand, torch::scalar_tensor(widened, wh.options()), wh);
  return xywh_to_xyxy(torch::cat({xywh.narrow(-1, 0, 2), wh}, -1));
}

Tensor TaskAlignedAssigner::candidates_in_gts(const Tensor& anchor_points, const Tensor& gt_bboxes,
                                              const Tensor& mask_gt) const {
  auto boxes = widened_boxes(gt_bboxes, mask_gt).unsqueeze(2);  // (B, M, 1, 4)
  auto lt = boxes.narrow(-1, 0, 2), rb = boxes.narrow(-1, 2, 2);
  const double eps = 1e-9;
  return ((anchor_points - lt > eps) & (rb - anchor_points > eps)).all(3);
}

Tensor TaskAlignedAssigner::topk_mask(const Tensor& metrics, const Tensor& mask_gt) const {
  const int64_t k = std::min(options_.topk, metrics.size(-1));
  auto idx = std::get<1>(metrics.topk(k, -1, /*largest=*/true));
  // Padding GTs select anchor 0 k times; counting duplicates below removes them.
  idx.masked_fill_(~mask_gt.expand({-1, -1, k}).to(torch::kBool), 0);
  auto count = torch::zeros(metrics.sizes(), idx.options().dtype(torch::kInt8));
  count.scatter_add_(-1, idx, torch::ones_like(idx, idx.options().dtype(torch::kInt8)));
  count.masked_fill_(count > 1, 0);
  return count.to(metrics.scalar_type());
}

Assignment TaskAlignedAssigner::operator()(const Tensor& pd_scores, const Tensor& pd_bboxes,
                                           const Tensor& anchor_points, const Tensor& gt_labels,
                                           const Tensor& gt_bboxes, const Tensor& mask_gt, const MaskQuality* masks,
                                           ScoreForm form) const {
  torch::NoGradGuard no_grad;
  const int64_t bs = pd_scores.size(0), na = pd_scores.size(1), m = gt_bboxes.size(1);
  const int64_t nc = options_.num_classes;
  auto lopts = pd_scores.options().dtype(torch::kLong);
  if (m == 0) {
    Assignment out;
    out.target_labels = torch::full({bs, na}, nc, lopts);
    out.target_bboxes = torch::zeros_like(pd_bboxes);
    out.target_scores = torch::zeros_like(pd_scores);
    out.fg_mask = torch::zeros({bs, na}, lopts.dtype(torch::kBool));
    out.target_gt_idx = torch::zeros({bs, na}, lopts);
    return out;
  }
  if (fused_available(pd_scores, pd_bboxes))
    return fused(pd_scores, pd_bboxes, anchor_points, gt_labels, gt_bboxes, mask_gt, masks, form);
  return dense(pd_scores, pd_bboxes, anchor_points, gt_labels, gt_bboxes, mask_gt, masks, form);
}

bool TaskAlignedAssigner::fused_available(const Tensor& pd_scores, const Tensor& pd_bboxes) const {
#ifdef LUCID_CUDA_KERNELS
  return cuda::assigner_kernels_available(pd_scores, pd_bboxes, options_.alpha, options_.beta);
#else
  (void)pd_scores, (void)pd_bboxes;
  return false;
#endif
}

Assignment TaskAlignedAssigner::fused(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                                      const Tensor& gt_labels, const Tensor& gt_bboxes, const Tensor& mask_gt,
                                      const MaskQuality* masks, ScoreForm form) const {
#ifdef LUCID_CUDA_KERNELS
  torch::NoGradGuard no_grad;
  const int64_t na = pd_scores.size(1);
  auto labels = gt_labels.squeeze(-1).to(torch::kLong).contiguous();  // (B, M)
  auto valid = mask_gt.squeeze(-1).to(torch::kBool).contiguous();     // (B, M)
  auto boxes = gt_bboxes.contiguous();
  auto metrics =
      cuda::candidate_metrics(pd_scores.contiguous(), pd_bboxes.contiguous(), anchor_points.contiguous(), labels, boxes,
                              widened_boxes(gt_bboxes, mask_gt).contiguous(), valid, options_.alpha, options_.beta,
                              masks ? options_.eps : 0.0, form == ScoreForm::kLogits);
  if (masks) {
    // As the dense form: mask IoUs of each GT's 3 * topk best candidates, overlap (CIoU + IoU) / 2.
    auto top = top_candidates(metrics.metric, std::min(3 * options_.topk, na), valid).contiguous();
    cuda::mask_aware_metrics(metrics, top, device_mask_ious(*masks, top, pd_bboxes, valid).contiguous(), valid,
                             options_.beta);
  }
  auto top = top_candidates(metrics.metric, std::min(options_.topk, na), valid);
  auto gts = cuda::resolve_gts(metrics, top, valid);
  if (options_.topk2 != options_.topk) gts = cuda::keep_top_assigned(metrics.metric, gts, std::min(options_.topk2, na));
  auto t = cuda::assignment_targets(gts, metrics, labels, boxes, options_.num_classes, options_.eps);
  Assignment out;
  out.target_labels = t.labels;
  out.target_bboxes = t.bboxes;
  out.target_scores = t.scores;
  out.fg_mask = t.fg;
  out.target_gt_idx = t.gt_idx;
  return out;
#else
  (void)pd_scores, (void)pd_bboxes, (void)anchor_points, (void)gt_labels, (void)gt_bboxes, (void)mask_gt, (void)masks,
      (void)form;
  throw std::logic_error("assigner: built without the CUDA kernels");
#endif
}

Assignment TaskAlignedAssigner::dense(const Tensor& scores_in, const Tensor& pd_bboxes, const Tensor& anchor_points,
                                      const Tensor& gt_labels, const Tensor& gt_bboxes, const Tensor& mask_gt,
                                      const MaskQuality* masks, ScoreForm form) const {
  torch::NoGradGuard no_grad;
  const Tensor pd_scores = form == ScoreForm::kLogits ? scores_in.sigmoid() : scores_in;
  const int64_t bs = pd_scores.size(0), na = pd_scores.size(1), m = gt_bboxes.size(1);
  const int64_t nc = options_.num_classes;
  auto lopts = pd_scores.options().dtype(torch::kLong);
  Assignment out;

  // Candidates and alignment metric, dense over (B, M, A).
  auto in_gts = candidates_in_gts(anchor_points, gt_bboxes, mask_gt);
  auto valid = mask_gt.to(torch::kBool);
  auto cand = in_gts & valid;
  auto labels = gt_labels.squeeze(-1).to(torch::kLong);  // (B, M)
  auto cls_scores = pd_scores.permute({0, 2, 1}).gather(1, labels.unsqueeze(-1).expand({bs, m, na}));
  auto bbox_scores = torch::where(cand, cls_scores, torch::zeros({}, pd_scores.options()));
  auto ciou = box_ciou_xyxy(gt_bboxes.unsqueeze(2), pd_bboxes.unsqueeze(1)).squeeze(-1).clamp_min(0);
  auto overlaps = torch::where(cand, ciou, torch::zeros({}, ciou.options()));
  auto align_metric = bbox_scores.pow(options_.alpha) * overlaps.pow(options_.beta);
  if (masks) {
    // Mask IoU for each GT's 3 * topk best candidates by the box metric (eps keeps zero-metric
    // candidates selectable), then overlap = (CIoU + mask IoU) / 2 and the metric again.
    auto dense = torch::where(cand, align_metric + options_.eps, torch::zeros({}, align_metric.options()));
    auto top = std::get<1>(dense.topk(std::min(3 * options_.topk, na), -1, /*largest=*/true));
    auto selected = torch::zeros_like(cand).scatter_(-1, top, true) & cand;
    Tensor miou;
    if (pd_scores.is_cpu()) {
      miou = selected_mask_ious(*masks, selected, pd_bboxes);
    } else {
      miou = torch::zeros_like(ciou).scatter_(-1, top, device_mask_ious(*masks, top, pd_bboxes, valid.squeeze(-1)));
      miou = torch::where(selected, miou, torch::zeros({}, miou.options()));
    }
    overlaps = torch::where(cand, (ciou + miou) / 2, torch::zeros({}, ciou.options()));
    align_metric = bbox_scores.pow(options_.alpha) * overlaps.pow(options_.beta);
  }

  auto mask_pos = topk_mask(align_metric, mask_gt) * in_gts * mask_gt;  // float (B, M, A)

  // Conflicts: an anchor positive for several GTs keeps the GT of highest CIoU over all GTs. (The
  // reference tests for conflicts first, a host synchronisation; applying it always is identical.)
  auto fg = mask_pos.sum(-2);
  auto multi = (fg.unsqueeze(1) > 1).expand({-1, m, -1});
  auto is_max = torch::zeros_like(mask_pos).scatter_(1, overlaps.argmax(1).unsqueeze(1), 1);
  mask_pos = torch::where(multi, is_max, mask_pos).to(torch::kFloat);
  if (options_.topk2 != options_.topk) {
    auto kept = std::get<1>((align_metric * mask_pos).topk(std::min(options_.topk2, na), -1, true));
    mask_pos = mask_pos * torch::zeros_like(mask_pos).scatter_(-1, kept, 1.0);
  }
  fg = mask_pos.sum(-2);
  auto gt_idx = mask_pos.argmax(-2);  // (B, A)

  // Targets of the assigned GTs.
  auto flat = gt_idx + torch::arange(bs, lopts).unsqueeze(1) * m;
  out.target_labels = gt_labels.to(torch::kLong).flatten().index({flat}).clamp_min(0);
  out.target_bboxes = gt_bboxes.reshape({-1, gt_bboxes.size(-1)}).index({flat});
  out.fg_mask = fg > 0;
  auto one_hot = torch::zeros({bs, na, nc}, lopts.dtype(torch::kInt8));
  one_hot.scatter_(2, out.target_labels.unsqueeze(-1), 1);
  one_hot = one_hot * out.fg_mask.unsqueeze(-1);

  // Soft targets: t * (GT's best CIoU) / (GT's best t + eps), max over GTs per anchor.
  auto am = align_metric * mask_pos;
  auto pos_align = am.amax(-1, true);
  auto pos_overlaps = (overlaps * mask_pos).amax(-1, true);
  auto norm = (am * pos_overlaps / (pos_align + options_.eps)).amax(-2).unsqueeze(-1);
  out.target_scores = one_hot * norm;
  out.target_gt_idx = gt_idx;
  return out;
}

Tensor TaskAlignedAssigner::top_candidates(const Tensor& metric, int64_t k, const Tensor& valid) {
#ifdef LUCID_CUDA_KERNELS
  if (cuda::top_candidates_available(metric)) return cuda::top_candidates(metric.contiguous(), k, valid.contiguous());
#endif
  (void)valid;
  return std::get<1>(metric.topk(k, -1, /*largest=*/true));
}

Tensor TaskAlignedAssigner::mask_ious(const MaskQuality& mq, const Tensor& top, const Tensor& pd_bboxes) {
  const int64_t bs = top.size(0), m = top.size(1), k = top.size(2);
  const int64_t nm = mq.proto.size(1), mh = mq.proto.size(2), mw = mq.proto.size(3), px = mh * mw;
  auto proto = mq.proto.flatten(2);  // (B, nm, P)
  auto gt = mq.gt_masks.flatten(2);  // (B, M, P) bool
  auto gt_area = gt.sum(-1, true);   // (B, M, 1) int64
  auto fopts = pd_bboxes.options();
  auto cols = torch::arange(mw, fopts).view({1, 1, 1, mw});
  auto rows = torch::arange(mh, fopts).view({1, 1, mh, 1});
  const int64_t per_gt = std::max<int64_t>(bs * k * px, 1);
  const int64_t step = std::clamp<int64_t>(mq.chunk_elements / per_gt, 1, std::max<int64_t>(m, 1));
  std::vector<Tensor> parts;
  for (int64_t g0 = 0; g0 < m; g0 += step) {
    const int64_t c = std::min(step, m - g0);
    auto idx = top.narrow(1, g0, c).reshape({bs, c * k});
    auto coef = mq.coefs.gather(1, idx.unsqueeze(-1).expand({bs, c * k, nm}));
    auto pred = coef.matmul(proto).gt(0).view({bs, c * k, mh, mw});
    // Cropped to the predicted box at prototype resolution, as the reference's crop_mask.
    auto box = (pd_bboxes.gather(1, idx.unsqueeze(-1).expand({bs, c * k, 4})) * mq.scale).unsqueeze(-1).unsqueeze(-1);
    auto b = box.unbind(2);  // 4 x (B, c k, 1, 1)
    pred = pred & (cols >= b[0]) & (cols < b[2]) & (rows >= b[1]) & (rows < b[3]);
    pred = pred.view({bs, c, k, px});
    auto g = gt.narrow(1, g0, c).unsqueeze(2);  // (B, c, 1, P)
    auto inter = (pred & g).sum(-1);            // (B, c, k) int64, exact
    auto uni = gt_area.narrow(1, g0, c) + pred.sum(-1) - inter;
    parts.push_back(inter.to(fopts.dtype()) / uni.clamp_min(1).to(fopts.dtype()));
  }
  return torch::cat(parts, 1);
}

Tensor TaskAlignedAssigner::device_mask_ious(const MaskQuality& mq, const Tensor& top, const Tensor& pd_bboxes,
                                             const Tensor& valid) {
#ifdef LUCID_CUDA_KERNELS
  if (cuda::candidate_mask_ious_available(mq.coefs, mq.proto, pd_bboxes)) {
    auto gt = mq.gt_masks.contiguous();
    auto area = mq.gt_area.defined() ? mq.gt_area.contiguous() : gt.flatten(2).sum(-1);
    return cuda::candidate_mask_ious(mq.coefs.contiguous(), mq.proto.contiguous(), gt, area, top.contiguous(),
                                     pd_bboxes.contiguous(), mq.scale, valid.contiguous());
  }
#endif
  (void)valid;  // the ATen form computes padding slots too; the caller zeroes them
  return mask_ious(mq, top, pd_bboxes);
}

Tensor TaskAlignedAssigner::selected_mask_ious(const MaskQuality& mq, const Tensor& selected, const Tensor& pd_bboxes) {
  const int64_t bs = selected.size(0);
  const int64_t mh = mq.proto.size(2), mw = mq.proto.size(3), px = mh * mw;
  auto fopts = pd_bboxes.options();
  auto miou = torch::zeros(selected.sizes(), fopts);
  auto cols = torch::arange(mw, fopts).view({1, 1, mw});
  auto rows = torch::arange(mh, fopts).view({1, mh, 1});
  const int64_t step = std::max<int64_t>(mq.chunk_elements / std::max<int64_t>(px, 1), 1);
  for (int64_t b = 0; b < bs; ++b) {
    auto pairs = selected[b].nonzero();  // (n, 2): GT, anchor
    const int64_t n = pairs.size(0);
    auto proto = mq.proto[b].flatten(1);  // (nm, P)
    auto gt = mq.gt_masks[b].flatten(1);  // (M, P) bool
    for (int64_t p0 = 0; p0 < n; p0 += step) {
      const int64_t c = std::min(step, n - p0);
      auto g = pairs.narrow(0, p0, c).select(1, 0), a = pairs.narrow(0, p0, c).select(1, 1);
      auto pred = mq.coefs[b].index({a}).matmul(proto).gt(0).view({c, mh, mw});
      // Cropped to the predicted box at prototype resolution, as the reference's crop_mask.
      auto box = (pd_bboxes[b].index({a}) * mq.scale).view({c, 4, 1, 1}).unbind(1);  // 4 x (c, 1, 1)
      pred = (pred & (cols >= box[0]) & (cols < box[2]) & (rows >= box[1]) & (rows < box[3])).view({c, px});
      auto truth = gt.index({g});           // (c, P)
      auto inter = (pred & truth).sum(-1);  // int64, exact
      auto uni = truth.sum(-1) + pred.sum(-1) - inter;
      miou[b].index_put_({g, a}, inter.to(fopts.dtype()) / uni.clamp_min(1).to(fopts.dtype()));
    }
  }
  return miou;
}

}  // namespace lucid::loss
