// Device helpers of the fused mask kernels (mask loss, candidate mask IoUs): a box's crop window at
// prototype resolution and a mask logit, as the ATen forms compute them, and a fixed-order block sum.
#pragma once
#include <cstdint>

namespace lucid::loss::cuda {

// The slot's crop window [x0, x1) x [y0, y1) in pixels: the columns c with x1f <= c < x2f, as the
// ATen form's comparisons select them (an empty window when a bound is not a number).
struct Window {
  int x0, x1, y0, y1;
};

__device__ inline Window window_of(const float* crop, int w, int h) {
  const float a = crop[0], b = crop[1], c = crop[2], d = crop[3];
  Window win{0, 0, 0, 0};
  if (isnan(a) || isnan(b) || isnan(c) || isnan(d)) return win;
  auto lo = [](float v, int n) { return static_cast<int>(fminf(fmaxf(ceilf(v), 0.f), static_cast<float>(n))); };
  win.x0 = lo(a, w);
  win.x1 = max(win.x0, lo(c, w));
  win.y0 = lo(b, h);
  win.y1 = max(win.y0, lo(d, h));
  return win;
}

// The map index of the i-th pixel of a window bw pixels wide, row by row.
__device__ inline int64_t window_pixel(const Window& win, int bw, int64_t w, int i) {
  return static_cast<int64_t>(win.y0 + i / bw) * w + win.x0 + i % bw;
}

// A slot's logit at map pixel p: its coefficients c (shared memory) dotted with the prototypes.
template <int NM>
__device__ inline float logit(const float* c, const float* pb, int64_t hw, int64_t nm, int64_t p) {
  float l = 0.f;
#pragma unroll
  for (int k = 0; k < NM; ++k)
    if (k < nm) l = fmaf(c[k], pb[k * hw + p], l);
  return l;
}

// The same logit from the pixel's prototypes held in registers (pv), in the same FMA order.
template <int NM>
__device__ inline float logit_of(const float* c, const float* pv, int64_t nm) {
  float l = 0.f;
#pragma unroll
  for (int k = 0; k < NM; ++k)
    if (k < nm) l = fmaf(c[k], pv[k], l);
  return l;
}

// Sum over the block in a fixed order: warps by shuffles, then the warps' sums in index order
// (scratch: one element per warp).
template <typename T>
__device__ inline T block_sum(T v, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  if (threadIdx.x == 0)
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) total += scratch[i];
  __syncthreads();
  return total;  // valid in thread 0
}

}  // namespace lucid::loss::cuda
