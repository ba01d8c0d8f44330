// The cropped mask BCE of mask_loss.h as fused CUDA kernels: each slot's work covers only the pixels
// inside its GT box and nothing for padding slots, where the ATen form computes every slot over the
// whole map. Slots of one GT window (the same GT index, crop and area: a GT's foreground anchors)
// share a block that reads each pixel's prototypes and target once for several of them (16 in the
// forward, 2 in the coefficient gradient, whose sums each take nm registers). Every sum runs in a
// fixed order (no atomics), the one-slot block's, so the kernels give the same bytes on every run
// and whether slots share blocks or not; their values agree with the ATen form to rounding (a
// different summation order). Built where nvcc and a CUDA torch are present (the
// LUCID_CUDA_KERNELS definition); elsewhere cropped_mask_bce runs its ATen form.
#pragma once
#include <ATen/ATen.h>

#include <utility>

namespace lucid::loss::cuda {

using at::Tensor;

// Whether the kernels were built, and take these inputs (CUDA tensors, at most kMaxCoefficients
// mask coefficients).
inline constexpr int64_t kMaxCoefficients = 64;
bool available(const Tensor& coefs, const Tensor& proto);

// kByWindow: slots of one GT window share a block (the default); kNone: a block per slot. Both give
// the same bytes.
enum class SlotGrouping { kByWindow, kNone };

// Inputs as cropped_mask_bce's, contiguous FP32 coefs and proto; gt_index int64; masks uint8 or
// int32 (overlap), uint8 (per GT). Returns the (B, K) slot terms.
Tensor cropped_mask_bce_forward(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap,
                                const Tensor& gt_index, const Tensor& crop, const Tensor& area, const Tensor& valid,
                                SlotGrouping grouping = SlotGrouping::kByWindow);

// The gradients of sum(grad_out * terms) with respect to coefs (B, K, nm) and, when want_proto,
// proto (B, nm, Hm, Wm).
std::pair<Tensor, Tensor> cropped_mask_bce_backward(const Tensor& grad_out, const Tensor& coefs, const Tensor& proto,
                                                    const Tensor& masks, bool overlap, const Tensor& gt_index,
                                                    const Tensor& crop, const Tensor& area, const Tensor& valid,
                                                    bool want_proto, SlotGrouping grouping = SlotGrouping::kByWindow);

}  // namespace lucid::loss::cuda
