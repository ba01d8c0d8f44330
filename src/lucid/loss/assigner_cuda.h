// The task-aligned assigner's dense (B, M, A) stages as CUDA kernels (TaskAlignedAssigner::fused):
// one pass computes each (image, GT slot, anchor)'s candidate flag, CIoU, score^alpha and metric
// with the ATen form's FP32 operations in its order (no contraction into fused multiply-adds, the
// same sqrt / pow forms), so the top-k selections see the same values; the steps after the top-k
// touch only the k selected anchors of each GT and one column per anchor, where the ATen form forms
// several more (B, M, A) tensors. Maxima are order-free, so every run gives the same bytes. Built
// with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::loss::cuda {

using at::Tensor;

// Whether the kernels take these inputs: CUDA FP32 scores and boxes, and exponents of the forms they
// reproduce (alpha, beta > 0).
bool assigner_kernels_available(const Tensor& pd_scores, const Tensor& pd_bboxes, double alpha, double beta);

// A padding slot's (valid false) rows are not written: every later step reads valid slots' rows only
// (the conflict rule takes a padding slot's overlap as its value there, 0).
struct CandidateMetrics {
  Tensor cand;       // (B, M, A) bool: anchor strictly inside the widened GT box of a real GT
  Tensor overlaps;   // (B, M, A) FP32: CIoU clamped at 0 on candidates, 0 elsewhere
  Tensor score_pow;  // (B, M, A) FP32: (candidate ? score of the GT's class : 0)^alpha
  Tensor metric;     // (B, M, A) FP32: score_pow * overlaps^beta, or with select_eps > 0 that + eps on
                     // candidates and 0 elsewhere (the mask-aware assigner's candidate selection)
};

// pd_scores (B, A, nc) probabilities, or logits (scores_are_logits) whose sigmoid the kernel takes
// as ATen's, 1 / (1 + exp(-x)), for the scores it reads; pd_bboxes (B, A, 4) xyxy pixels, anchor_points (A, 2), labels
// (B, M) int64, gt_bboxes and widened (B, M, 4) xyxy (the candidate test uses the widened boxes), valid (B, M) bool.
CandidateMetrics candidate_metrics(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                                   const Tensor& labels, const Tensor& gt_bboxes, const Tensor& widened,
                                   const Tensor& valid, double alpha, double beta, double select_eps,
                                   bool scores_are_logits = false);

// The mask-aware overlaps in place: overlaps = candidate ? (overlaps + mask_iou) / 2 : 0, where
// mask_iou is top_iou (B, M, k) at each valid slot's distinct candidates top (B, M, k) and 0
// elsewhere; metric = score_pow * overlaps^beta. Padding slots' rows (no candidates, all zeros)
// are left as they are, which is what the formula gives them.
void mask_aware_metrics(CandidateMetrics& m, const Tensor& top, const Tensor& top_iou, const Tensor& valid,
                        double beta);

// Each anchor's GT after the top-k selection top (B, M, k) and the conflict rule: the one GT whose
// top-k holds it as a candidate, or, held by several, the GT of highest overlap over all slots
// (lowest index on ties); -1 for none. (B, A) int64.
Tensor resolve_gts(const CandidateMetrics& m, const Tensor& top, const Tensor& valid);

struct Targets {
  Tensor labels, bboxes, scores, fg, gt_idx;  // as Assignment
};

// The assignment's targets from each anchor's GT (B, A) (-1: background): class, box, the soft
// score t * (GT's best overlap) / (GT's best t + eps) on the class, foreground flag and GT index.
Targets assignment_targets(const Tensor& gts, const CandidateMetrics& m, const Tensor& labels, const Tensor& gt_bboxes,
                           int64_t num_classes, double eps);

}  // namespace lucid::loss::cuda
