#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <stdexcept>

#include "lucid/loss/assigner_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kThreads = 256;
constexpr double kPi = 3.141592653589793238462643383279502884;  // std::numbers::pi, as boxes.cpp

// ATen's pow(x, scalar) on CUDA: sqrt for 0.5, products for 2 and 3, powf otherwise.
enum class PowForm : int { kSqrt, kSquare, kCube, kPowf };
struct Pow {
  PowForm form;
  float e;
};

Pow pow_form(double e) {
  if (e == 0.5) return {PowForm::kSqrt, 0.5f};
  const float f = static_cast<float>(e);
  if (static_cast<double>(f) == 2) return {PowForm::kSquare, f};
  if (static_cast<double>(f) == 3) return {PowForm::kCube, f};
  return {PowForm::kPowf, f};
}

__device__ __forceinline__ float aten_pow(float x, Pow p) {
  switch (p.form) {
    case PowForm::kSqrt:
      return sqrtf(x);
    case PowForm::kSquare:
      return __fmul_rn(x, x);
    case PowForm::kCube:
      return __fmul_rn(__fmul_rn(x, x), x);
    default:
      return powf(x, p.e);
  }
}

// torch::minimum / maximum / clamp_min(0): NaN propagates.
__device__ __forceinline__ float nan_min(float a, float b) { return a != a ? a : (b != b ? b : fminf(a, b)); }
__device__ __forceinline__ float nan_max(float a, float b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }
__device__ __forceinline__ float clamp0(float x) { return x != x ? x : fmaxf(x, 0.f); }

// boxes.cpp's box_ciou_xyxy(gt, pd) in its operation order (eps 1e-7), each product and sum rounded
// on its own as separate ATen kernels round them.
__device__ float ciou(const float* g, const float4 p) {
  const float eps = 1e-7f;
  const float ax1 = g[0], ay1 = g[1], ax2 = g[2], ay2 = g[3];
  const float bx1 = p.x, by1 = p.y, bx2 = p.z, by2 = p.w;
  const float w1 = __fsub_rn(ax2, ax1), h1 = __fadd_rn(__fsub_rn(ay2, ay1), eps);
  const float w2 = __fsub_rn(bx2, bx1), h2 = __fadd_rn(__fsub_rn(by2, by1), eps);
  const float inter = __fmul_rn(clamp0(__fsub_rn(nan_min(ax2, bx2), nan_max(ax1, bx1))),
                                clamp0(__fsub_rn(nan_min(ay2, by2), nan_max(ay1, by1))));
  const float uni = __fadd_rn(__fsub_rn(__fadd_rn(__fmul_rn(w1, h1), __fmul_rn(w2, h2)), inter), eps);
  const float iou = __fdiv_rn(inter, uni);
  const float cw = __fsub_rn(nan_max(ax2, bx2), nan_min(ax1, bx1));
  const float ch = __fsub_rn(nan_max(ay2, by2), nan_min(ay1, by1));
  const float c2 = __fadd_rn(__fadd_rn(__fmul_rn(cw, cw), __fmul_rn(ch, ch)), eps);
  const float dx = __fsub_rn(__fsub_rn(__fadd_rn(bx1, bx2), ax1), ax2);
  const float dy = __fsub_rn(__fsub_rn(__fadd_rn(by1, by2), ay1), ay2);
  const float rho2 = __fmul_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), 0.25f);  // ATen's / 4
  const float k = static_cast<float>(4 / (kPi * kPi));
  const float da = __fsub_rn(atanf(__fdiv_rn(w2, h2)), atanf(__fdiv_rn(w1, h1)));
  const float v = __fmul_rn(k, __fmul_rn(da, da));
  const float alpha = __fdiv_rn(v, __fadd_rn(__fadd_rn(__fsub_rn(1.f, iou), v), eps));
  return __fsub_rn(iou, __fadd_rn(__fdiv_rn(rho2, c2), __fmul_rn(v, alpha)));
}

struct Dims {
  int64_t bs, m, a, nc;
};

// One thread per (image, anchor), looping over the GT slots: the anchor's box and point are read
// once, each slot's outputs are written coalesced along the anchors.
__global__ void candidate_metrics_kernel(const float* scores, const float4* boxes, const float2* points,
                                         const int64_t* labels, const float* gt, const float* widened,
                                         const bool* valid, Dims d, Pow alpha, Pow beta, float select_eps, bool logits,
                                         bool* cand, float* overlaps, float* score_pow, float* metric) {
  const int64_t a = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, b = blockIdx.y;
  if (a >= d.a) return;
  const float4 box = boxes[b * d.a + a];
  const float2 pt = points[a];
  const float in_eps = 1e-9f;  // the ATen form's comparison with the double 1e-9, in FP32
  for (int64_t m = 0; m < d.m; ++m) {
    const int64_t slot = b * d.m + m, i = slot * d.a + a;
    if (!valid[slot]) continue;  // a padding slot's row is never read (see candidate_metrics)
    const float* w = widened + slot * 4;
    const bool c = __fsub_rn(pt.x, w[0]) > in_eps && __fsub_rn(pt.y, w[1]) > in_eps && __fsub_rn(w[2], pt.x) > in_eps &&
                   __fsub_rn(w[3], pt.y) > in_eps;
    float s = 0.f, o = 0.f;
    if (c) {
      int64_t cls = labels[slot];
      cls = cls < 0 ? 0 : (cls >= d.nc ? d.nc - 1 : cls);
      s = scores[(b * d.a + a) * d.nc + cls];
      if (logits) s = __fdiv_rn(1.f, __fadd_rn(1.f, expf(-s)));  // ATen's sigmoid
      o = clamp0(ciou(gt + slot * 4, box));
    }
    const float sp = aten_pow(s, alpha);
    float t = __fmul_rn(sp, aten_pow(o, beta));
    if (select_eps > 0.f) t = c ? __fadd_rn(t, select_eps) : 0.f;
    cand[i] = c;
    overlaps[i] = o;
    score_pow[i] = sp;
    metric[i] = t;
  }
}

// The mask-aware overlap of one anchor, candidate ? (CIoU + mask IoU) / 2 : 0, and its metric.
struct Aware {
  float overlap, metric;
};

__device__ __forceinline__ Aware mask_aware(bool cand, float overlap, float score_pow, float mask_iou, Pow beta) {
  const float o = cand ? __fmul_rn(__fadd_rn(overlap, mask_iou), 0.5f) : 0.f;  // ATen's / 2
  return {o, __fmul_rn(score_pow, aten_pow(o, beta))};
}

// One block per valid slot's row: its top candidates take their mask IoUs, every other anchor a
// mask IoU of 0. A padding slot's row holds no candidate and its zeros stay as they are.
__global__ void mask_aware_kernel(const bool* cand, const int64_t* top, const float* top_iou, const bool* valid,
                                  const float* score_pow, Pow beta, int64_t a, int64_t k, float* overlaps,
                                  float* metric) {
  const int64_t slot = blockIdx.x, row = slot * a;
  if (!valid[slot]) return;
  extern __shared__ Aware selected[];  // the top candidates', from the overlaps before any is written
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const int64_t i = row + top[slot * k + j];
    selected[j] = mask_aware(cand[i], overlaps[i], score_pow[i], top_iou[slot * k + j], beta);
  }
  __syncthreads();
  for (int64_t x = threadIdx.x; x < a; x += blockDim.x) {
    const int64_t i = row + x;
    const Aware v = mask_aware(cand[i], overlaps[i], score_pow[i], 0.f, beta);
    overlaps[i] = v.overlap, metric[i] = v.metric;
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const int64_t i = row + top[slot * k + j];
    overlaps[i] = selected[j].overlap, metric[i] = selected[j].metric;
  }
}

// Each real GT's top-k candidates claim their anchors.
__global__ void claim_kernel(const int64_t* top, const bool* cand, const bool* valid, Dims d, int64_t k, int* count,
                             int* claimant) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= d.bs * d.m * k) return;
  const int64_t slot = t / k;
  if (!valid[slot]) return;
  const int64_t b = slot / d.m, a = top[t];
  if (!cand[slot * d.a + a]) return;
  atomicAdd(count + b * d.a + a, 1);
  claimant[b * d.a + a] = static_cast<int>(slot - b * d.m);  // read only where a single GT claims
}

__global__ void resolve_kernel(const int* count, const int* claimant, const float* overlaps, const bool* valid, Dims d,
                               int64_t* gts) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d.bs * d.a) return;
  const int c = count[i];
  int64_t g = -1;
  if (c == 1) {
    g = claimant[i];
  } else if (c > 1) {
    // argmax over the slots as ATen's: the first maximum, a NaN above everything. A padding slot's
    // overlap is 0 (not a candidate); its row is not written.
    const int64_t b = i / d.a, a = i - b * d.a;
    const float* col = overlaps + b * d.m * d.a + a;
    const bool* slot_valid = valid + b * d.m;
    float best = slot_valid[0] ? col[0] : 0.f;
    g = 0;
    for (int64_t m = 1; m < d.m; ++m) {
      const float v = slot_valid[m] ? col[m * d.a] : 0.f;
      if (best == best && (v > best || v != v)) best = v, g = m;
    }
  }
  gts[i] = g;
}

// Each GT's best metric and best overlap over its anchors, as FP32 bit patterns: the values are
// non-negative, so integer maxima order them, in any order of the atomics.
__global__ void gt_maxima_kernel(const int64_t* gts, const float* metric, const float* overlaps, Dims d,
                                 int* best_metric, int* best_overlap) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d.bs * d.a) return;
  const int64_t g = gts[i];
  if (g < 0) return;
  const int64_t b = i / d.a, a = i - b * d.a, slot = b * d.m + g;
  atomicMax(best_metric + slot, __float_as_int(metric[slot * d.a + a]));
  atomicMax(best_overlap + slot, __float_as_int(overlaps[slot * d.a + a]));
}

__global__ void targets_kernel(const int64_t* gts, const float* metric, const int* best_metric, const int* best_overlap,
                               const int64_t* labels, const float4* gt_boxes, Dims d, float eps, int64_t* out_labels,
                               float4* out_boxes, bool* fg, int64_t* gt_idx, float* norm) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d.bs * d.a) return;
  const int64_t g = gts[i], b = i / d.a, a = i - b * d.a;
  const bool f = g >= 0;
  const int64_t slot = b * d.m + (f ? g : 0);
  const int64_t lab = labels[slot];
  out_labels[i] = lab < 0 ? 0 : lab;
  out_boxes[i] = gt_boxes[slot];
  fg[i] = f;
  gt_idx[i] = f ? g : 0;
  norm[i] = f ? __fdiv_rn(__fmul_rn(metric[slot * d.a + a], __int_as_float(best_overlap[slot])),
                          __fadd_rn(__int_as_float(best_metric[slot]), eps))
              : 0.f;
}

__global__ void scores_kernel(const int64_t* labels, const bool* fg, const float* norm, int64_t n, int64_t nc,
                              float* scores) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t ba = i / nc;
  scores[i] = fg[ba] && labels[ba] == i - ba * nc ? norm[ba] : 0.f;
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

void check(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("assigner kernels: ") + what);
}

bool is(const Tensor& t, at::ScalarType type) { return t.is_cuda() && t.scalar_type() == type && t.is_contiguous(); }

}  // namespace

bool assigner_kernels_available(const Tensor& pd_scores, const Tensor& pd_bboxes, double alpha, double beta) {
  for (const auto* t : {&pd_scores, &pd_bboxes})
    if (!t->is_cuda() || t->scalar_type() != at::kFloat) return false;
  return alpha > 0 && beta > 0;
}

CandidateMetrics candidate_metrics(const Tensor& pd_scores, const Tensor& pd_bboxes, const Tensor& anchor_points,
                                   const Tensor& labels, const Tensor& gt_bboxes, const Tensor& widened,
                                   const Tensor& valid, double alpha, double beta, double select_eps,
                                   bool scores_are_logits) {
  check(is(pd_scores, at::kFloat) && is(pd_bboxes, at::kFloat) && is(anchor_points, at::kFloat) &&
            is(labels, at::kLong) && is(gt_bboxes, at::kFloat) && is(widened, at::kFloat) && is(valid, at::kBool),
        "unsupported input types or layouts");
  check(alpha > 0 && beta > 0, "exponents must be positive");
  const Dims d{pd_scores.size(0), gt_bboxes.size(1), pd_scores.size(1), pd_scores.size(2)};
  const c10::cuda::CUDAGuard guard(pd_scores.device());
  CandidateMetrics m;
  const auto f = pd_scores.options();
  m.cand = at::empty({d.bs, d.m, d.a}, f.dtype(at::kBool));
  m.overlaps = at::empty({d.bs, d.m, d.a}, f);
  m.score_pow = at::empty({d.bs, d.m, d.a}, f);
  m.metric = at::empty({d.bs, d.m, d.a}, f);
  if (m.cand.numel() == 0) return m;
  const dim3 grid(blocks(d.a), static_cast<unsigned>(d.bs));
  candidate_metrics_kernel<<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      pd_scores.data_ptr<float>(), reinterpret_cast<const float4*>(pd_bboxes.data_ptr<float>()),
      reinterpret_cast<const float2*>(anchor_points.data_ptr<float>()), labels.data_ptr<int64_t>(),
      gt_bboxes.data_ptr<float>(), widened.data_ptr<float>(), valid.data_ptr<bool>(), d, pow_form(alpha),
      pow_form(beta), static_cast<float>(select_eps), scores_are_logits, m.cand.data_ptr<bool>(),
      m.overlaps.data_ptr<float>(), m.score_pow.data_ptr<float>(), m.metric.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return m;
}

void mask_aware_metrics(CandidateMetrics& m, const Tensor& top, const Tensor& top_iou, const Tensor& valid,
                        double beta) {
  check(is(top, at::kLong) && top.dim() == 3 && is(top_iou, at::kFloat) && top_iou.sizes() == top.sizes() &&
            is(valid, at::kBool) && top.size(0) == m.cand.size(0) && top.size(1) == m.cand.size(1) &&
            valid.numel() == top.size(0) * top.size(1),
        "mask IoUs must match the metrics' slots");
  const int64_t slots = top.size(0) * top.size(1), a = m.cand.size(2), k = top.size(2);
  if (slots == 0 || a == 0) return;
  const c10::cuda::CUDAGuard guard(top.device());
  mask_aware_kernel<<<static_cast<unsigned>(slots), kThreads, k * sizeof(Aware), at::cuda::getCurrentCUDAStream()>>>(
      m.cand.data_ptr<bool>(), top.data_ptr<int64_t>(), top_iou.data_ptr<float>(), valid.data_ptr<bool>(),
      m.score_pow.data_ptr<float>(), pow_form(beta), a, k, m.overlaps.data_ptr<float>(), m.metric.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

Tensor resolve_gts(const CandidateMetrics& m, const Tensor& top, const Tensor& valid) {
  check(is(top, at::kLong) && top.dim() == 3 && is(valid, at::kBool), "unsupported top-k or valid layout");
  const Dims d{m.cand.size(0), m.cand.size(1), m.cand.size(2), 0};
  const c10::cuda::CUDAGuard guard(top.device());
  const auto stream = at::cuda::getCurrentCUDAStream();
  auto iopts = top.options().dtype(at::kInt);
  auto count = at::zeros({d.bs, d.a}, iopts);
  auto claimant = at::empty({d.bs, d.a}, iopts);
  auto gts = at::empty({d.bs, d.a}, top.options());
  if (gts.numel() == 0) return gts;
  const int64_t k = top.size(2);
  if (top.numel() > 0)
    claim_kernel<<<blocks(top.numel()), kThreads, 0, stream>>>(top.data_ptr<int64_t>(), m.cand.data_ptr<bool>(),
                                                               valid.data_ptr<bool>(), d, k, count.data_ptr<int>(),
                                                               claimant.data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  resolve_kernel<<<blocks(gts.numel()), kThreads, 0, stream>>>(count.data_ptr<int>(), claimant.data_ptr<int>(),
                                                               m.overlaps.data_ptr<float>(), valid.data_ptr<bool>(), d,
                                                               gts.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return gts;
}

Targets assignment_targets(const Tensor& gts, const CandidateMetrics& m, const Tensor& labels, const Tensor& gt_bboxes,
                           int64_t num_classes, double eps) {
  check(is(gts, at::kLong) && is(labels, at::kLong) && is(gt_bboxes, at::kFloat), "unsupported target layouts");
  const Dims d{m.cand.size(0), m.cand.size(1), m.cand.size(2), num_classes};
  const c10::cuda::CUDAGuard guard(gts.device());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const auto f = m.metric.options();
  auto best_metric = at::zeros({d.bs, d.m}, f.dtype(at::kInt));
  auto best_overlap = at::zeros({d.bs, d.m}, f.dtype(at::kInt));
  Targets t;
  t.labels = at::empty({d.bs, d.a}, gts.options());
  t.bboxes = at::empty({d.bs, d.a, 4}, f);
  t.scores = at::empty({d.bs, d.a, d.nc}, f);
  t.fg = at::empty({d.bs, d.a}, f.dtype(at::kBool));
  t.gt_idx = at::empty({d.bs, d.a}, gts.options());
  auto norm = at::empty({d.bs, d.a}, f);
  const int64_t n = d.bs * d.a;
  if (n == 0) return t;
  gt_maxima_kernel<<<blocks(n), kThreads, 0, stream>>>(gts.data_ptr<int64_t>(), m.metric.data_ptr<float>(),
                                                       m.overlaps.data_ptr<float>(), d, best_metric.data_ptr<int>(),
                                                       best_overlap.data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  targets_kernel<<<blocks(n), kThreads, 0, stream>>>(
      gts.data_ptr<int64_t>(), m.metric.data_ptr<float>(), best_metric.data_ptr<int>(), best_overlap.data_ptr<int>(),
      labels.data_ptr<int64_t>(), reinterpret_cast<const float4*>(gt_bboxes.data_ptr<float>()), d,
      static_cast<float>(eps), t.labels.data_ptr<int64_t>(), reinterpret_cast<float4*>(t.bboxes.data_ptr<float>()),
      t.fg.data_ptr<bool>(), t.gt_idx.data_ptr<int64_t>(), norm.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (t.scores.numel() > 0)
    scores_kernel<<<blocks(t.scores.numel()), kThreads, 0, stream>>>(
        t.labels.data_ptr<int64_t>(), t.fg.data_ptr<bool>(), norm.data_ptr<float>(), t.scores.numel(), d.nc,
        t.scores.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return t;
}

}  // namespace lucid::loss::cuda
