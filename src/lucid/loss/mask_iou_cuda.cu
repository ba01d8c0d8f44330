#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>

#include "lucid/loss/mask_iou_cuda.h"
#include "lucid/loss/mask_logits.cuh"
#include "lucid/loss/mask_loss_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kPairThreads = 128;    // per-pair form: threads per (GT slot, candidate) pair
constexpr int kSlotThreads = 128;    // per-slot form: threads per block
constexpr int kSlotSplit = 4;        // per-slot form: blocks per slot, each every 4th row of its span
constexpr int kSlotCandidates = 64;  // per-slot form: the most candidates a slot holds (YOLO26: 30)

struct Dims {
  int64_t anchors, gts, k, nm, h, w;
};

// inter / max(union, 1), as the ATen form divides the exact counts.
__device__ inline float iou_of(int64_t inter, int64_t pred, int64_t gt_area) {
  const int64_t uni = gt_area + pred - inter;
  return __fdiv_rn(static_cast<float>(inter), static_cast<float>(uni > 1 ? uni : 1));
}

// A candidate's crop window: its box scaled to prototype pixels, as the ATen form's FP32 product.
__device__ inline Window candidate_window(const float* box, float scale, const Dims& d) {
  float crop[4];
  for (int q = 0; q < 4; ++q) crop[q] = box[q] * scale;
  return window_of(crop, static_cast<int>(d.w), static_cast<int>(d.h));
}

// The general form: one block per (GT slot, candidate) pair, over the candidate's window.
template <int NM>
__global__ void pair_iou_kernel(const float* coefs, const float* proto, const bool* gt_masks, const int64_t* gt_area,
                                const int64_t* top, const float* boxes, const bool* valid, float scale, float* out,
                                Dims d) {
  const int64_t pair = blockIdx.x, slot = pair / d.k, b = slot / d.gts;
  __shared__ float c[NM];
  __shared__ int scratch[2][kPairThreads / 32];
  if (!valid[slot]) {
    if (threadIdx.x == 0) out[pair] = 0.f;
    return;
  }
  const int64_t a = b * d.anchors + top[pair];
  for (int k = threadIdx.x; k < NM; k += blockDim.x) c[k] = k < d.nm ? coefs[a * d.nm + k] : 0.f;
  __syncthreads();
  const Window win = candidate_window(boxes + a * 4, scale, d);
  const int64_t hw = d.h * d.w;
  const float* pb = proto + b * d.nm * hw;
  const bool* gt = gt_masks + slot * hw;
  const int bw = win.x1 - win.x0, n = bw * (win.y1 - win.y0);
  int pred = 0, inter = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t p = window_pixel(win, bw, d.w, i);
    if (logit<NM>(c, pb, hw, d.nm, p) > 0.f) {
      ++pred;
      inter += gt[p] ? 1 : 0;
    }
  }
  pred = block_sum(pred, scratch[0]);
  inter = block_sum(inter, scratch[1]);
  if (threadIdx.x == 0) out[pair] = iou_of(inter, pred, gt_area[slot]);
}

// The per-slot form: kSlotSplit blocks per GT slot share its candidates' work. Each reads a pixel's
// prototypes once for all candidates whose window holds it, where the general form reads them once
// per candidate. A candidate's logit is the same FMA chain as logit<NM>, so the counts are the
// general form's. counts (slots, K, 2): predicted pixels, and those also in the GT mask.
template <int NM>
__global__ void slot_counts_kernel(const float* coefs, const float* proto, const bool* gt_masks, const int64_t* top,
                                   const float* boxes, const bool* valid, float scale, unsigned* counts, Dims d) {
  constexpr int kWarps = kSlotThreads / 32;
  const int64_t slot = blockIdx.x, b = slot / d.gts;
  if (!valid[slot]) return;
  __shared__ float c[kSlotCandidates][NM];
  __shared__ int4 win[kSlotCandidates];  // x0, x1, y0, y1
  __shared__ int4 span;                  // the windows' bounding box
  __shared__ unsigned pred[kWarps][kSlotCandidates], inter[kWarps][kSlotCandidates];
  const int k = static_cast<int>(d.k), warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const Window w = candidate_window(boxes + (b * d.anchors + top[slot * d.k + j]) * 4, scale, d);
    win[j] = make_int4(w.x0, w.x1, w.y0, w.y1);
  }
  for (int i = threadIdx.x; i < k * NM; i += blockDim.x) {
    const int j = i / NM, q = i % NM;
    c[j][q] = q < d.nm ? coefs[(b * d.anchors + top[slot * d.k + j]) * d.nm + q] : 0.f;
  }
  for (int i = threadIdx.x; i < kWarps * kSlotCandidates; i += blockDim.x)
    pred[i / kSlotCandidates][i % kSlotCandidates] = inter[i / kSlotCandidates][i % kSlotCandidates] = 0u;
  __syncthreads();
  if (threadIdx.x == 0) {
    int4 s = make_int4(0, 0, 0, 0);
    bool any = false;
    for (int j = 0; j < k; ++j) {
      const int4 w = win[j];
      if (w.x >= w.y || w.z >= w.w) continue;
      s = any ? make_int4(min(s.x, w.x), max(s.y, w.y), min(s.z, w.z), max(s.w, w.w)) : w;
      any = true;
    }
    span = s;
  }
  __syncthreads();
  const int4 s = span;
  const int bw = s.y - s.x, rows = s.w - s.z, first = static_cast<int>(blockIdx.y);
  const int n = rows > first ? (rows - first + kSlotSplit - 1) / kSlotSplit * bw : 0;
  const int64_t hw = d.h * d.w;
  const float* pb = proto + b * d.nm * hw;
  const bool* gt = gt_masks + slot * hw;
  // Whole warps step together: each candidate's counts are two ballots a warp.
  for (int base = 0; base < n; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const bool in = i < n;
    const int x = in ? s.x + i % bw : -1, y = in ? s.z + first + (i / bw) * kSlotSplit : -1;
    const int64_t p = in ? static_cast<int64_t>(y) * d.w + x : 0;
    float pv[NM];
#pragma unroll
    for (int q = 0; q < NM; ++q) pv[q] = in && q < d.nm ? pb[q * hw + p] : 0.f;
    const bool in_gt = in && gt[p];
#pragma unroll 1
    for (int j = 0; j < k; ++j) {
      const int4 w = win[j];
      bool positive = false;
      if (x >= w.x && x < w.y && y >= w.z && y < w.w) {
        positive = logit_of<NM>(c[j], pv, d.nm) > 0.f;
      }
      const unsigned hits = __ballot_sync(0xffffffffu, positive), both = __ballot_sync(0xffffffffu, positive && in_gt);
      if (lane == 0) {
        pred[warp][j] += __popc(hits);
        inter[warp][j] += __popc(both);
      }
    }
  }
  __syncthreads();
  // Integer sums, so the order of the blocks' atomics does not matter.
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    unsigned pj = 0u, ij = 0u;
    for (int w = 0; w < kWarps; ++w) pj += pred[w][j], ij += inter[w][j];
    if (pj == 0u) continue;
    unsigned* pair = counts + (slot * d.k + j) * 2;
    atomicAdd(pair, pj);
    atomicAdd(pair + 1, ij);
  }
}

__global__ void slot_ious_kernel(const unsigned* counts, const int64_t* gt_area, const bool* valid, int64_t pairs,
                                 int64_t k, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const int64_t slot = i / k;
  out[i] = valid[slot] ? iou_of(counts[2 * i + 1], counts[2 * i], gt_area[slot]) : 0.f;
}

struct Args {
  const float *coefs, *proto, *boxes;
  const bool *gt_masks, *valid;
  const int64_t *gt_area, *top;
  float scale;
  float* out;
  Dims d;
};

template <int NM>
void launch_pairs(const Args& a, int64_t pairs, cudaStream_t stream) {
  pair_iou_kernel<NM><<<static_cast<unsigned>(pairs), kPairThreads, 0, stream>>>(
      a.coefs, a.proto, a.gt_masks, a.gt_area, a.top, a.boxes, a.valid, a.scale, a.out, a.d);
}

template <int NM>
void launch_slots(const Args& a, unsigned* counts, int64_t pairs, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(pairs / a.d.k), kSlotSplit);
  slot_counts_kernel<NM>
      <<<grid, kSlotThreads, 0, stream>>>(a.coefs, a.proto, a.gt_masks, a.top, a.boxes, a.valid, a.scale, counts, a.d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const unsigned blocks = static_cast<unsigned>((pairs + 255) / 256);
  slot_ious_kernel<<<blocks, 256, 0, stream>>>(counts, a.gt_area, a.valid, pairs, a.d.k, a.out);
}

}  // namespace

bool candidate_mask_ious_available(const Tensor& coefs, const Tensor& proto, const Tensor& pd_bboxes) {
  for (const auto* t : {&coefs, &proto, &pd_bboxes})
    if (!t->is_cuda() || t->scalar_type() != at::kFloat) return false;
  return coefs.dim() == 3 && coefs.size(2) <= kMaxCoefficients;
}

Tensor candidate_mask_ious(const Tensor& coefs, const Tensor& proto, const Tensor& gt_masks, const Tensor& gt_area,
                           const Tensor& top, const Tensor& pd_bboxes, float scale, const Tensor& valid,
                           MaskIouForm form) {
  auto fp32 = [](const Tensor& t) { return t.scalar_type() == at::kFloat && t.is_contiguous() && t.is_cuda(); };
  if (!fp32(coefs) || !fp32(proto) || !fp32(pd_bboxes) || gt_masks.scalar_type() != at::kBool ||
      !gt_masks.is_contiguous() || gt_area.scalar_type() != at::kLong || !gt_area.is_contiguous() ||
      top.scalar_type() != at::kLong || !top.is_contiguous() || valid.scalar_type() != at::kBool ||
      !valid.is_contiguous() || coefs.size(2) > kMaxCoefficients)
    throw std::invalid_argument("candidate mask IoU kernel: unsupported input types or layouts");
  const c10::cuda::CUDAGuard guard(coefs.device());
  auto out = at::empty(top.sizes(), coefs.options());
  const Dims d{coefs.size(1), top.size(1), top.size(2), coefs.size(2), proto.size(2), proto.size(3)};
  const int64_t pairs = top.numel();
  if (pairs == 0) return out;
  const Args a{coefs.data_ptr<float>(),     proto.data_ptr<float>(),
               pd_bboxes.data_ptr<float>(), gt_masks.data_ptr<bool>(),
               valid.data_ptr<bool>(),      gt_area.data_ptr<int64_t>(),
               top.data_ptr<int64_t>(),     scale,
               out.data_ptr<float>(),       d};
  auto stream = at::cuda::getCurrentCUDAStream();
  const bool small = d.nm <= 32;
  if (form == MaskIouForm::kPerSlot && d.k <= kSlotCandidates) {
    auto counts = at::zeros({pairs, 2}, top.options().dtype(at::kInt));
    auto* c = reinterpret_cast<unsigned*>(counts.data_ptr<int>());
    small ? launch_slots<32>(a, c, pairs, stream) : launch_slots<kMaxCoefficients>(a, c, pairs, stream);
  } else {
    small ? launch_pairs<32>(a, pairs, stream) : launch_pairs<kMaxCoefficients>(a, pairs, stream);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::loss::cuda
