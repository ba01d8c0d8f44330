#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>

#include "lucid/loss/mask_logits.cuh"
#include "lucid/loss/mask_loss_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kSlotThreads = 128;   // threads per slot (forward, coefficient gradients)
constexpr int kPixelThreads = 128;  // pixels per block (prototype gradients)
constexpr int kSlotTile = 32;       // slots staged in shared memory at a time
constexpr int kMaxGroup = 16;       // slots of one GT window a forward block takes (YOLO26: up to 10)
static_assert(kMaxGroup * kSlotThreads * 4 <= 8192, "the forward block's sums fit its shared memory");

// Slots a coefficient-gradient block takes: each holds nm accumulators a thread.
template <int NM>
constexpr int kGradGroup = NM <= 32 ? 2 : 1;

struct Shape {
  int64_t slots_per_image, nm, h, w, gts;  // K, nm, Hm, Wm, M (per-GT masks)
  bool overlap;
};

template <typename MaskT>
__device__ inline float target_at(const MaskT* masks, const Shape& s, int64_t b, int64_t gt, int64_t p) {
  const int64_t hw = s.h * s.w;
  if (s.overlap) return masks[b * hw + p] == static_cast<MaskT>(gt + 1) ? 1.f : 0.f;
  return static_cast<float>(masks[(b * s.gts + gt) * hw + p]);
}

// ATen's binary_cross_entropy_with_logits, element form.
__device__ inline float bce(float l, float t) {
  const float m = fmaxf(-l, 0.f);
  return (1.f - t) * l + m + logf(expf(-m) + expf(-l - m));
}

__device__ inline float sigmoid(float l) { return 1.f / (1.f + expf(-l)); }

// Slots that share a GT index, a crop window and an area share their target and window, so a block
// can read each pixel's prototypes and target once for several of them. A group's valid slots, in
// index order, are taken G at a time; the first of each G leads a block. A slot's sums keep the
// one-slot block's pixel-to-thread assignment and order, so any G gives the bytes of G = 1.
struct Group {
  int64_t members[kMaxGroup];
  int count;
};

__device__ inline bool same_slot_key(const int64_t* gt_index, const float* crop, const float* area, const bool* valid,
                                     int64_t i, int64_t j) {
  if (!valid[j] || gt_index[j] != gt_index[i] || __float_as_uint(area[j]) != __float_as_uint(area[i])) return false;
  for (int q = 0; q < 4; ++q)
    if (__float_as_uint(crop[j * 4 + q]) != __float_as_uint(crop[i * 4 + q])) return false;
  return true;
}

// Whether valid `slot` leads a block, and then its members (itself first), in index order. Slots of
// the image are [first, end).
template <int G>
__device__ bool lead_group(const int64_t* gt_index, const float* crop, const float* area, const bool* valid,
                           int64_t first, int64_t end, int64_t slot, Group& g) {
  if constexpr (G == 1) {
    if (threadIdx.x == 0) g.members[0] = slot, g.count = 1;
    __syncthreads();
    return true;
  }
  int rank = 0;  // the group's valid slots before this one
  for (int64_t base = first; base < slot; base += blockDim.x) {
    const int64_t j = base + threadIdx.x;
    rank += __syncthreads_count(j < slot && same_slot_key(gt_index, crop, area, valid, slot, j));
  }
  if (rank % G != 0) return false;
  if (threadIdx.x < 32) {  // one warp takes the next G - 1 in index order
    int n = 1;
    for (int64_t base = slot + 1; base < end && n < G; base += 32) {
      const int64_t j = base + threadIdx.x;
      const bool same = j < end && same_slot_key(gt_index, crop, area, valid, slot, j);
      const unsigned ballot = __ballot_sync(0xffffffffu, same);
      const int r = n + __popc(ballot & ((1u << threadIdx.x) - 1u));
      if (same && r < G) g.members[r] = j;
      n += __popc(ballot);
    }
    if (threadIdx.x == 0) g.members[0] = slot, g.count = min(n, G);
  }
  __syncthreads();
  return true;
}

template <typename MaskT, int NM, int G>
__global__ void forward_kernel(const float* coefs, const float* proto, const MaskT* masks, const int64_t* gt_index,
                               const float* crop, const float* area, const bool* valid, float* out, Shape s) {
  const int64_t slot = blockIdx.x, b = slot / s.slots_per_image;
  __shared__ Group group;
  __shared__ float c[G][NM];
  __shared__ float acc[G][kSlotThreads];  // each thread's sums, in shared memory: indexed by member
  __shared__ float scratch[kSlotThreads / 32];
  if (!valid[slot]) {
    if (threadIdx.x == 0) out[slot] = 0.f;
    return;
  }
  const int64_t first = b * s.slots_per_image;
  if (!lead_group<G>(gt_index, crop, area, valid, first, first + s.slots_per_image, slot, group)) return;
  const int count = group.count;
  for (int i = threadIdx.x; i < count * NM; i += blockDim.x) {
    const int m = i / NM, k = i % NM;
    c[m][k] = k < s.nm ? coefs[group.members[m] * s.nm + k] : 0.f;
  }
  __syncthreads();
  const Window win = window_of(crop + slot * 4, static_cast<int>(s.w), static_cast<int>(s.h));
  const int64_t hw = s.h * s.w, gt = gt_index[slot];
  const float* pb = proto + b * s.nm * hw;
  const int bw = win.x1 - win.x0, n = bw * (win.y1 - win.y0);
  const int t = threadIdx.x;
  for (int m = 0; m < count; ++m) acc[m][t] = 0.f;
  for (int i = t; i < n; i += blockDim.x) {
    const int64_t p = window_pixel(win, bw, s.w, i);
    float pv[NM];
#pragma unroll
    for (int k = 0; k < NM; ++k) pv[k] = k < s.nm ? pb[k * hw + p] : 0.f;
    const float target = target_at(masks, s, b, gt, p);
#pragma unroll 1
    for (int m = 0; m < count; ++m) acc[m][t] += bce(logit_of<NM>(c[m], pv, s.nm), target);
  }
  for (int m = 0; m < count; ++m) {
    const float total = block_sum(acc[m][t], scratch);
    const int64_t member = group.members[m];
    if (threadIdx.x == 0) out[member] = total / static_cast<float>(hw) / area[member];
  }
}

// d term / d logit over the group's window: (sigmoid(l) - t) * g, g = grad / area / (Hm * Wm). A
// block takes up to G slots of one window; each prototype value it reads serves all of them.
template <typename MaskT, int NM, int G>
__global__ void coefs_grad_kernel(const float* grad_out, const float* coefs, const float* proto, const MaskT* masks,
                                  const int64_t* gt_index, const float* crop, const float* area, const bool* valid,
                                  float* grad_coefs, Shape s) {
  const int64_t slot = blockIdx.x, b = slot / s.slots_per_image;
  __shared__ Group group;
  __shared__ float c[G][NM];
  __shared__ float partial[kSlotThreads / 32][NM];
  const int64_t hw = s.h * s.w;
  if (!valid[slot]) {
    for (int k = threadIdx.x; k < s.nm; k += blockDim.x) grad_coefs[slot * s.nm + k] = 0.f;
    return;
  }
  const int64_t first = b * s.slots_per_image;
  if (!lead_group<G>(gt_index, crop, area, valid, first, first + s.slots_per_image, slot, group)) return;
  const int count = group.count;
  for (int i = threadIdx.x; i < G * NM; i += blockDim.x) {
    const int m = i / NM, k = i % NM;
    c[m][k] = m < count && k < s.nm ? coefs[group.members[m] * s.nm + k] : 0.f;
  }
  __syncthreads();
  float g[G];
#pragma unroll
  for (int m = 0; m < G; ++m) {
    const int64_t member = group.members[m < count ? m : 0];
    g[m] = grad_out[member] / area[member] / static_cast<float>(hw);
  }
  const Window win = window_of(crop + slot * 4, static_cast<int>(s.w), static_cast<int>(s.h));
  const int64_t gt = gt_index[slot];
  const float* pb = proto + b * s.nm * hw;
  const int bw = win.x1 - win.x0, n = bw * (win.y1 - win.y0);
  float acc[G][NM];
#pragma unroll
  for (int m = 0; m < G; ++m)
#pragma unroll
    for (int k = 0; k < NM; ++k) acc[m][k] = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t p = window_pixel(win, bw, s.w, i);
    float l[G];
#pragma unroll
    for (int m = 0; m < G; ++m) l[m] = 0.f;
#pragma unroll
    for (int k = 0; k < NM; ++k) {
      if (k >= s.nm) continue;
      const float v = pb[k * hw + p];
#pragma unroll
      for (int m = 0; m < G; ++m) l[m] = fmaf(c[m][k], v, l[m]);  // logit<NM>'s chain, one per slot
    }
    const float t = target_at(masks, s, b, gt, p);
    float dl[G];
#pragma unroll
    for (int m = 0; m < G; ++m) dl[m] = (sigmoid(l[m]) - t) * g[m];
#pragma unroll
    for (int k = 0; k < NM; ++k) {
      if (k >= s.nm) continue;
      const float v = pb[k * hw + p];
#pragma unroll
      for (int m = 0; m < G; ++m) acc[m][k] = fmaf(dl[m], v, acc[m][k]);
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < G; ++m) {
    if (m >= count) break;
#pragma unroll
    for (int k = 0; k < NM; ++k) {
      float v = acc[m][k];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
      if (lane == 0) partial[warp][k] = v;
    }
    __syncthreads();
    const int64_t member = group.members[m];
    for (int k = threadIdx.x; k < s.nm; k += blockDim.x) {
      float v = 0.f;
      for (int w = 0; w < kSlotThreads / 32; ++w) v += partial[w][k];
      grad_coefs[member * s.nm + k] = v;
    }
    __syncthreads();
  }
}

// One thread per pixel of one image: the sum over the image's slots, in slot order, of
// dl * coefs for every slot whose window holds the pixel. Slots from the image's last valid one on
// (active[b]) add nothing and are not visited: the loss puts the valid slots first.
template <typename MaskT, int NM>
__global__ void proto_grad_kernel(const float* grad_out, const float* coefs, const float* proto, const MaskT* masks,
                                  const int64_t* gt_index, const float* crop, const float* area, const bool* valid,
                                  const int* active, float* grad_proto, Shape s) {
  const int64_t b = blockIdx.y, hw = s.h * s.w, p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool inside = p < hw;
  const int x = inside ? static_cast<int>(p % s.w) : -1, y = inside ? static_cast<int>(p / s.w) : -1;
  __shared__ float c[kSlotTile][NM];
  __shared__ int win[kSlotTile][4];
  __shared__ float g[kSlotTile];
  __shared__ int64_t gt[kSlotTile];
  const float* pb = proto + b * s.nm * hw;
  float pv[NM], acc[NM];
#pragma unroll
  for (int k = 0; k < NM; ++k) {
    pv[k] = inside && k < s.nm ? pb[k * hw + p] : 0.f;
    acc[k] = 0.f;
  }
  const int64_t first = b * s.slots_per_image, slots = active[b];
  for (int64_t t0 = 0; t0 < slots; t0 += kSlotTile) {
    const int tile = slots - t0 < kSlotTile ? static_cast<int>(slots - t0) : kSlotTile;
    __syncthreads();
    for (int i = threadIdx.x; i < tile; i += blockDim.x) {
      const int64_t slot = first + t0 + i;
      Window w{0, 0, 0, 0};
      float gs = 0.f;
      if (valid[slot]) {
        w = window_of(crop + slot * 4, static_cast<int>(s.w), static_cast<int>(s.h));
        gs = grad_out[slot] / area[slot] / static_cast<float>(hw);
      }
      win[i][0] = w.x0;
      win[i][1] = w.x1;
      win[i][2] = w.y0;
      win[i][3] = w.y1;
      g[i] = gs;
      gt[i] = gt_index[slot];
    }
    for (int i = threadIdx.x; i < tile * NM; i += blockDim.x) {
      const int j = i / NM, k = i % NM;
      c[j][k] = k < s.nm ? coefs[(first + t0 + j) * s.nm + k] : 0.f;
    }
    __syncthreads();
    if (!inside) continue;
    for (int j = 0; j < tile; ++j) {
      if (x < win[j][0] || x >= win[j][1] || y < win[j][2] || y >= win[j][3]) continue;
      float l = 0.f;
#pragma unroll
      for (int k = 0; k < NM; ++k)
        if (k < s.nm) l = fmaf(c[j][k], pv[k], l);
      const float dl = (sigmoid(l) - target_at(masks, s, b, gt[j], p)) * g[j];
#pragma unroll
      for (int k = 0; k < NM; ++k) acc[k] = fmaf(dl, c[j][k], acc[k]);
    }
  }
  if (!inside) return;
#pragma unroll
  for (int k = 0; k < NM; ++k)
    if (k < s.nm) grad_proto[(b * s.nm + k) * hw + p] = acc[k];
}

Shape shape_of(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap) {
  return Shape{coefs.size(1), coefs.size(2), proto.size(2), proto.size(3), overlap ? 0 : masks.size(1), overlap};
}

void check(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap, const Tensor& gt_index,
           const Tensor& crop, const Tensor& area, const Tensor& valid) {
  auto fp32 = [](const Tensor& t) { return t.scalar_type() == at::kFloat && t.is_contiguous() && t.is_cuda(); };
  const bool mask_ok = overlap ? (masks.scalar_type() == at::kByte || masks.scalar_type() == at::kInt)
                               : masks.scalar_type() == at::kByte;
  if (!fp32(coefs) || !fp32(proto) || !fp32(crop) || !fp32(area) || !masks.is_contiguous() || !mask_ok ||
      gt_index.scalar_type() != at::kLong || !gt_index.is_contiguous() || valid.scalar_type() != at::kBool ||
      !valid.is_contiguous() || coefs.size(2) > kMaxCoefficients)
    throw std::invalid_argument("cropped mask BCE kernels: unsupported input types or layouts");
}

struct Args {
  const float *grad, *coefs, *proto;
  const void* masks;
  const int64_t* gt_index;
  const float *crop, *area;
  const bool* valid;
  const int* active;  // (B) one past each image's last valid slot (prototype gradients)
  float *out, *grad_coefs, *grad_proto;
  int64_t blocks, bs, hw;
  bool grouped;  // slots of one GT window share a block
};

template <typename MaskT, int NM, int G>
void launch_forward_kernel(const Args& a, const Shape& s, cudaStream_t stream) {
  forward_kernel<MaskT, NM, G><<<static_cast<unsigned>(a.blocks), kSlotThreads, 0, stream>>>(
      a.coefs, a.proto, static_cast<const MaskT*>(a.masks), a.gt_index, a.crop, a.area, a.valid, a.out, s);
}

template <typename MaskT, int NM>
void launch_forward(const Args& a, const Shape& s, cudaStream_t stream) {
  a.grouped ? launch_forward_kernel<MaskT, NM, kMaxGroup>(a, s, stream)
            : launch_forward_kernel<MaskT, NM, 1>(a, s, stream);
}

template <typename MaskT, int NM, int G>
void launch_coefs_grad(const Args& a, const Shape& s, cudaStream_t stream) {
  coefs_grad_kernel<MaskT, NM, G><<<static_cast<unsigned>(a.blocks), kSlotThreads, 0, stream>>>(
      a.grad, a.coefs, a.proto, static_cast<const MaskT*>(a.masks), a.gt_index, a.crop, a.area, a.valid, a.grad_coefs,
      s);
}

template <typename MaskT, int NM>
void launch_backward(const Args& a, const Shape& s, cudaStream_t stream) {
  if (a.blocks > 0)
    a.grouped ? launch_coefs_grad<MaskT, NM, kGradGroup<NM>>(a, s, stream)
              : launch_coefs_grad<MaskT, NM, 1>(a, s, stream);
  if (a.grad_proto && a.bs > 0 && a.hw > 0) {
    const dim3 grid(static_cast<unsigned>((a.hw + kPixelThreads - 1) / kPixelThreads), static_cast<unsigned>(a.bs));
    proto_grad_kernel<MaskT, NM>
        <<<grid, kPixelThreads, 0, stream>>>(a.grad, a.coefs, a.proto, static_cast<const MaskT*>(a.masks), a.gt_index,
                                             a.crop, a.area, a.valid, a.active, a.grad_proto, s);
  }
}

// The launch for the masks' type and the smallest coefficient bound holding nm.
void forward_for(const Tensor& masks, const Args& a, const Shape& s, cudaStream_t stream) {
  const bool i32 = masks.scalar_type() == at::kInt, small = s.nm <= 32;
  if (i32 && small)
    launch_forward<int32_t, 32>(a, s, stream);
  else if (i32)
    launch_forward<int32_t, kMaxCoefficients>(a, s, stream);
  else if (small)
    launch_forward<uint8_t, 32>(a, s, stream);
  else
    launch_forward<uint8_t, kMaxCoefficients>(a, s, stream);
}

void backward_for(const Tensor& masks, const Args& a, const Shape& s, cudaStream_t stream) {
  const bool i32 = masks.scalar_type() == at::kInt, small = s.nm <= 32;
  if (i32 && small)
    launch_backward<int32_t, 32>(a, s, stream);
  else if (i32)
    launch_backward<int32_t, kMaxCoefficients>(a, s, stream);
  else if (small)
    launch_backward<uint8_t, 32>(a, s, stream);
  else
    launch_backward<uint8_t, kMaxCoefficients>(a, s, stream);
}

Args args_of(const Tensor& coefs, const Tensor& proto, const Tensor& masks, const Tensor& gt_index, const Tensor& crop,
             const Tensor& area, const Tensor& valid, SlotGrouping grouping) {
  Args a{};
  a.grouped = grouping == SlotGrouping::kByWindow;
  a.coefs = coefs.data_ptr<float>();
  a.proto = proto.data_ptr<float>();
  a.masks = masks.data_ptr();
  a.gt_index = gt_index.data_ptr<int64_t>();
  a.crop = crop.data_ptr<float>();
  a.area = area.data_ptr<float>();
  a.valid = valid.data_ptr<bool>();
  a.bs = coefs.size(0);
  a.blocks = coefs.size(0) * coefs.size(1);
  a.hw = proto.size(2) * proto.size(3);
  return a;
}

}  // namespace

bool available(const Tensor& coefs, const Tensor& proto) {
  return coefs.is_cuda() && proto.is_cuda() && coefs.dim() == 3 && coefs.size(2) <= kMaxCoefficients;
}

Tensor cropped_mask_bce_forward(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap,
                                const Tensor& gt_index, const Tensor& crop, const Tensor& area, const Tensor& valid,
                                SlotGrouping grouping) {
  check(coefs, proto, masks, overlap, gt_index, crop, area, valid);
  const c10::cuda::CUDAGuard guard(coefs.device());
  auto out = at::empty({coefs.size(0), coefs.size(1)}, coefs.options());
  const Shape s = shape_of(coefs, proto, masks, overlap);
  if (coefs.size(0) * coefs.size(1) == 0) return out;
  auto a = args_of(coefs, proto, masks, gt_index, crop, area, valid, grouping);
  a.out = out.data_ptr<float>();
  forward_for(masks, a, s, at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::pair<Tensor, Tensor> cropped_mask_bce_backward(const Tensor& grad_out, const Tensor& coefs, const Tensor& proto,
                                                    const Tensor& masks, bool overlap, const Tensor& gt_index,
                                                    const Tensor& crop, const Tensor& area, const Tensor& valid,
                                                    bool want_proto, SlotGrouping grouping) {
  check(coefs, proto, masks, overlap, gt_index, crop, area, valid);
  const c10::cuda::CUDAGuard guard(coefs.device());
  auto grad = grad_out.to(at::kFloat).contiguous();
  const Shape s = shape_of(coefs, proto, masks, overlap);
  auto grad_coefs = at::empty_like(coefs);
  Tensor grad_proto = want_proto ? at::empty_like(proto) : Tensor();
  auto a = args_of(coefs, proto, masks, gt_index, crop, area, valid, grouping);
  a.grad = grad.data_ptr<float>();
  a.grad_coefs = grad_coefs.data_ptr<float>();
  a.grad_proto = want_proto ? grad_proto.data_ptr<float>() : nullptr;
  Tensor active;
  if (want_proto && a.bs > 0) {
    const int64_t k = coefs.size(1);
    auto io = valid.options().dtype(at::kInt);
    active = k == 0 ? at::zeros({a.bs}, io)
                    : (valid.view({a.bs, k}).to(at::kInt) * at::arange(1, k + 1, io)).amax(1).to(at::kInt).contiguous();
    a.active = active.data_ptr<int>();
  }
  backward_for(masks, a, s, at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_coefs, grad_proto};
}

}  // namespace lucid::loss::cuda
