// The instance-mask term of the segmentation loss over fixed slots, lean in memory.
//
// For every slot (an image's foreground anchor, or padding): the mask logits coefs . proto of its
// image, BCE against its GT mask, kept inside the GT box (at mask resolution), averaged over the
// whole map and divided by the box's normalised area (the reference's single_mask_loss per anchor).
// The logits of all slots, (B, K, Hm, Wm), would be the largest tensor of the loss at large batches,
// so they are never stored: the forward and the backward work through the slots in chunks of at most
// `chunk_elements` logits and the backward recomputes them; only coefficients, prototypes and the
// targets are kept. Chunk count and sizes follow from the shapes alone (no host synchronisation).
#pragma once
#include <torch/torch.h>

namespace lucid::loss {

using torch::Tensor;

// coefs (B, K, nm) slot mask coefficients; proto (B, nm, Hm, Wm); masks: overlap mode the (B, Hm, Wm)
// index map (value k+1 = GT k), otherwise (B, M, Hm, Wm) 0/1 per GT; gt_index (B, K) int64 GT of
// each slot; crop (B, K, 4) x1 y1 x2 y2 at mask resolution; area (B, K) normalised GT box area (any
// positive value in padding); valid (B, K) bool, false on padding slots.
// Returns (B, K): each valid slot's term, 0 on padding. Gradients flow to coefs and proto only.
// On CUDA, where the fused kernels are built (mask_loss_cuda.h), form Fastest runs them: work only
// inside each valid slot's box, same bytes on every run, values equal to the ATen form's to rounding.
// Aten: the chunked ATen form everywhere.
enum class MaskBceForm { Fastest, Aten };
Tensor cropped_mask_bce(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap,
                        const Tensor& gt_index, const Tensor& crop, const Tensor& area, const Tensor& valid,
                        int64_t chunk_elements, MaskBceForm form = MaskBceForm::Fastest);
// Whether form Fastest runs the fused kernels for these inputs.
bool fused_mask_bce_available(const Tensor& coefs, const Tensor& proto);

}  // namespace lucid::loss
