// The assigner's top-k candidate anchors of each GT slot as one CUDA kernel. It selects the set
// that ATen's topk(k, -1, largest=true) selects: every value above the k-th largest, then values
// equal to it in index order until k are taken, in the order of ATen's radix select (a NaN above
// everything, +0 above -0). Only valid slots pass over their row. ATen's top-k passes over every
// slot of the capacity, most of them padding. The assignment uses the indices as a set (the claims,
// the mask IoUs scattered back), so they come in index order, not by value: first those above the
// k-th value, then its equals. Built with the other kernels (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

namespace lucid::loss::cuda {

using at::Tensor;

// Whether the kernel takes this metric: CUDA FP32 (B, M, A), at most 2^31 - 1 anchors.
bool top_candidates_available(const Tensor& metric);

// metric (B, M, A) FP32 contiguous, valid (B, M) bool, 0 <= k <= A. Returns (B, M, k) int64: each
// valid slot's top-k anchor set as above; a padding slot gets 0, 1, ..., k - 1, which no later step
// reads.
Tensor top_candidates(const Tensor& metric, int64_t k, const Tensor& valid);

// The second selection of an assigner whose topk2 is below its topk, as one kernel: metric (B, M, A)
// FP32, gts (B, A) int64 each anchor's slot or -1. An anchor stays with its slot when it is in the
// top-k set (as above, over the whole row) of that slot's metric times the mask of the anchors
// assigned to it, as ATen computes the product; otherwise it becomes -1. The ATen form builds that
// (B, M, A) mask and product, a top-k over every slot, and a sum and an argmax over the slots.
// Returns the new (B, A) int64.
Tensor keep_top_assigned(const Tensor& metric, const Tensor& gts, int64_t k);

}  // namespace lucid::loss::cuda
