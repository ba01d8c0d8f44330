// Task-aligned assignment of ground-truth instances to anchors (TOOD), with the reference's details:
// candidate anchors lie strictly inside the GT box, GT sides shorter than the second stride are
// widened to it first (small-object expansion); alignment t = score^alpha * overlap^beta with
// overlap = CIoU, or for YOLO26-seg (MaskQuality given) the mean of CIoU and the predicted mask's IoU;
// top-k per GT; an anchor claimed by several GTs goes to the GT of highest CIoU among all GTs; with
// topk2 < topk only each GT's best topk2 anchors survive; soft targets are t rescaled so that each
// GT's best anchor scores its best CIoU.
//
// No host synchronisation: the dense form works over (B, M, A); on CUDA fused kernels do the same.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace lucid::loss {

using torch::Tensor;

struct AssignerOptions {
  int64_t topk = 10;
  int64_t topk2 = 0;  // 0: same as topk (no second selection)
  int64_t num_classes = 80;
  double alpha = 0.5, beta = 6.0, eps = 1e-9;
  std::vector<double> strides{8, 16, 32};
};

// The reference's SegTaskAlignedAssigner (YOLO26-seg): for each GT's 3 * topk best candidates by the
// box alignment metric (score^alpha * CIoU^beta + eps), the IoU of the anchor's binarised predicted
// mask, cropped to its predicted box, with the GT mask at prototype resolution; other candidates get
// mask IoU 0. The overlap is then (CIoU + mask IoU) / 2 for every stage after the metric. Masks are
// decoded in chunks of GTs of at most `chunk_elements` mask pixels; shapes follow from (B, M, A, Hm, Wm).
struct MaskQuality {
  Tensor coefs;         // (B, A, nm) mask coefficients
  Tensor proto;         // (B, nm, Hm, Wm) prototypes
  Tensor gt_masks;      // (B, M, Hm, Wm) bool GT masks at prototype resolution
  Tensor gt_area;       // (B, M) int64 their pixel counts; undefined: counted where needed
  float scale = 0.25f;  // prototype pixels per input pixel (Hm / input height, in FP32 as the reference)
  int64_t chunk_elements = int64_t{1} << 24;
};

struct Assignment {
  Tensor target_labels;  // (B, A) int64 class of the assigned GT (clamped >= 0; meaningless on background)
  Tensor target_bboxes;  // (B, A, 4) xyxy pixels of the assigned GT
  Tensor target_scores;  // (B, A, nc) soft one-hot, zero on background
  Tensor fg_mask;        // (B, A) bool
  Tensor target_gt_idx;  // (B, A) int64 GT index within the image (0 on background)
};

// What pd_scores hold: probabilities, or logits whose sigmoid the assigner takes (the fused form
// only for the candidates it reads, with ATen's sigmoid arithmetic).
enum class ScoreForm { kProbabilities, kLogits };

class TaskAlignedAssigner {
 public:
  explicit TaskAlignedAssigner(AssignerOptions options);

  // pd_scores (B, A, nc) as `form` says; pd_bboxes (B, A, 4) xyxy pixels; anchor_points (A, 2) pixels;
  // gt_labels (B, M, 1); gt_bboxes (B, M, 4) xyxy pixels; mask_gt (B, M, 1) 1 for real GTs.
  // Runs without gradient.
  Assignment operator()(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                        const Tensor& gt_labels, const Tensor& gt_bboxes, const Tensor& mask_gt,
                        const MaskQuality* masks = nullptr, ScoreForm form = ScoreForm::kProbabilities) const;

  const AssignerOptions& options() const { return options_; }

  // The two forms operator() chooses between (m > 0): `fused`, the CUDA kernels of
  // loss/assigner_cuda.h, where fused_available (CUDA FP32 predictions); `dense`, tensor operations
  // over (B, M, A) on any device. They give the same bytes.
  bool fused_available(const Tensor& pd_scores, const Tensor& pd_bboxes) const;
  Assignment fused(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                   const Tensor& gt_labels, const Tensor& gt_bboxes, const Tensor& mask_gt,
                   const MaskQuality* masks = nullptr, ScoreForm form = ScoreForm::kProbabilities) const;
  Assignment dense(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                   const Tensor& gt_labels, const Tensor& gt_bboxes, const Tensor& mask_gt,
                   const MaskQuality* masks = nullptr, ScoreForm form = ScoreForm::kProbabilities) const;

  // The stages, exposed for tests. (B, M, A) results.
  // (B, M, 4) xyxy GT boxes with sides shorter than the second stride widened to it (real GTs).
  Tensor widened_boxes(const Tensor& gt_bboxes, const Tensor& mask_gt) const;
  Tensor candidates_in_gts(const Tensor& anchor_points, const Tensor& gt_bboxes, const Tensor& mask_gt) const;
  Tensor topk_mask(const Tensor& metrics, const Tensor& mask_gt) const;
  // (B, M, k) the k largest metrics' anchors of each valid slot (valid (B, M) bool), as a set: the
  // kernel of loss/top_candidates_cuda.h on CUDA FP32 where built, which leaves padding slots' rows
  // unread; ATen's topk otherwise. Both select the same anchors.
  static Tensor top_candidates(const Tensor& metric, int64_t k, const Tensor& valid);
  // (B, M, k) IoU of the predicted mask of anchor top[b, g, j] with GT g's mask; pd_bboxes in pixels.
  // Dense over every GT slot (padding included): the device form, without host synchronisation.
  static Tensor mask_ious(const MaskQuality& masks, const Tensor& top, const Tensor& pd_bboxes);
  // mask_ious on a CUDA device: the fused kernel (loss/mask_iou_cuda.h) where built and its inputs
  // are FP32, which skips padding slots (valid (B, M) false: 0) and pixels outside each predicted
  // box; the ATen form otherwise.
  static Tensor device_mask_ious(const MaskQuality& masks, const Tensor& top, const Tensor& pd_bboxes,
                                 const Tensor& valid);
  // (B, M, A) the same IoUs where `selected` (B, M, A) is true, zero elsewhere, computed for the
  // selected pairs only (the reference's sparse gather): the CPU form, which reads the pairs on the
  // host. Equal to mask_ious scattered and masked by `selected`.
  static Tensor selected_mask_ious(const MaskQuality& masks, const Tensor& selected, const Tensor& pd_bboxes);

 private:
  AssignerOptions options_;
};

}  // namespace lucid::loss
