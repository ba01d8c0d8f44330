// The mask-aware assignment's candidate mask IoUs (TaskAlignedAssigner::mask_ious) as CUDA kernels:
// a (GT slot, candidate) pair's work covers only the pixels inside the candidate's predicted box and
// nothing for padding slots, where the ATen form forms every slot's whole predicted masks. Counts
// are integers summed exactly; the logits' sums run in a fixed order, so the kernels give the same
// bytes on every run. They agree with the ATen form except where a logit's sign differs by rounding
// (another summation order than the matmul's). Built with the mask loss kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::loss::cuda {

using at::Tensor;

// Two forms with the same bytes. Per slot: a GT slot's blocks read each pixel's prototypes once for
// all of its candidates (up to 32, on maps up to about 512 x 512); the default, where it holds. Per
// pair: one block per candidate, reading the prototypes again for each; any shape.
enum class MaskIouForm { kPerSlot, kPerPair };

// Whether the kernel takes these inputs: CUDA FP32 coefficients, prototypes and boxes, at most 64
// mask coefficients.
bool candidate_mask_ious_available(const Tensor& coefs, const Tensor& proto, const Tensor& pd_bboxes);

// coefs (B, A, nm), proto (B, nm, Hm, Wm): FP32; gt_masks (B, M, Hm, Wm) bool; gt_area (B, M) int64
// (the GT masks' pixel counts); top (B, M, K) int64 candidate anchors; pd_bboxes (B, A, 4) FP32 xyxy
// input pixels, scaled by `scale` to prototype pixels; valid (B, M) bool. Returns (B, M, K) FP32:
// inter / max(union, 1) of the candidate's predicted mask (logit > 0, cropped to its box) and the
// GT mask; 0 for padding slots.
Tensor candidate_mask_ious(const Tensor& coefs, const Tensor& proto, const Tensor& gt_masks, const Tensor& gt_area,
                           const Tensor& top, const Tensor& pd_bboxes, float scale, const Tensor& valid,
                           MaskIouForm form = MaskIouForm::kPerSlot);

}  // namespace lucid::loss::cuda
