// The arithmetic of the depthwise kernels (model/depthwise_cuda.cu), written once for the GPU and
// the host: each function computes a strip of output elements, one block's partial weight-gradient
// sums or one summed weight gradient, and the kernels call them from their grid loops. The unit tests call
// the same functions in plain loops on the CPU and compare them with LibTorch's convolution, so the
// index arithmetic and the summation order are checked on machines without a GPU.
//
// Indices are 32-bit (a fraction of the cost of 64-bit divisions on the GPU): callers keep tensors
// below kMaxDepthwiseElements, so that an index plus a grid's stride stays below 2^31.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define LUCID_HOST_DEVICE __host__ __device__ __forceinline__
#define LUCID_UNROLL _Pragma("unroll")
#else
#define LUCID_HOST_DEVICE inline
#define LUCID_UNROLL
#endif

namespace lucid::model::depthwise {

constexpr int64_t kMaxDepthwiseElements = int64_t{1} << 30;
constexpr int64_t kWeightGradBlocks = 4096;  // at most this many row blocks in the weight gradient's first pass

// A channels_last tensor's sizes: element (n, h, w, c) is at ((n * h_size + h) * w_size + w) * c_size + c.
struct Shape {
  int n, c, h, w;
};

// How the weight gradient's first pass splits the N * H image rows: blocks of rows_per_block rows
// (the last one possibly shorter). It depends on the shape alone, and so does the summation order.
struct RowBlocks {
  int64_t rows_per_block, blocks;
};

inline RowBlocks row_blocks(int64_t rows) {
  const int64_t per = rows > kWeightGradBlocks ? (rows + kWeightGradBlocks - 1) / kWeightGradBlocks : 1;
  return {per, rows > 0 ? (rows + per - 1) / per : 1};
}

// Each output element of the stride-1 convolution with K / 2 zero padding is its taps' products
// summed in FP32 in row-major tap order, taps outside the image (the zero padding) left out; each
// weight gradient (channel c, tap) is its input-times-output-gradient products summed over a row
// block's pixels in row, then column order. The functions below keep the K x K window's inputs in
// registers as it slides along a row, which changes which loads happen, not the sums' order: the
// unit tests compare their bytes with the plain per-element definitions.

constexpr int kStrip = 4;  // output columns per thread in the convolution kernel

// The convolution kernel's work items: strip i of the output, channel fastest (neighbouring threads
// take neighbouring channels, so every load is coalesced in the channels_last layout), then the
// strips of a row, then the rows.
struct Strip {
  int n, h, col0, c;
};

LUCID_HOST_DEVICE int strips_per_row(const Shape& s) { return (s.w + kStrip - 1) / kStrip; }

LUCID_HOST_DEVICE Strip strip_at(int i, const Shape& s) {
  const int strips = strips_per_row(s);
  const int c = i % s.c, rest = i / s.c, row = rest / strips;
  return {row / s.h, row % s.h, rest % strips * kStrip, c};
}

// Outputs (n, h, col0 .. col0 + kStrip - 1, c) of x convolved with wt (columns past the image not
// written). flipped: the kernel turned by 180 degrees (tap (a, b) takes weight (K-1-a, K-1-b)),
// which gives the input gradient when x is the output's gradient.
template <typename T, int K>
LUCID_HOST_DEVICE void output_strip(const T* __restrict__ x, const T* __restrict__ wt, T* __restrict__ y,
                                    const Shape& s, bool flipped, int n, int h, int col0, int c) {
  constexpr int kSpan = kStrip + K - 1;  // input columns col0 - K/2 .. col0 + kStrip - 1 + K/2
  float w[K * K];
  LUCID_UNROLL
  for (int t = 0; t < K * K; ++t) w[t] = static_cast<float>(wt[c * K * K + (flipped ? K * K - 1 - t : t)]);
  bool inside[kSpan];
  LUCID_UNROLL
  for (int j = 0; j < kSpan; ++j) inside[j] = col0 + j - K / 2 >= 0 && col0 + j - K / 2 < s.w;
  float acc[kStrip];
  LUCID_UNROLL
  for (int o = 0; o < kStrip; ++o) acc[o] = 0.f;
  LUCID_UNROLL
  for (int a = 0; a < K; ++a) {
    const int hi = h + a - K / 2;
    if (hi < 0 || hi >= s.h) continue;
    const T* row = x + (n * s.h + hi) * s.w * s.c + c;  // (n, hi, 0, c)
    float xr[kSpan];
    LUCID_UNROLL
    for (int j = 0; j < kSpan; ++j) xr[j] = inside[j] ? static_cast<float>(row[(col0 + j - K / 2) * s.c]) : 0.f;
    LUCID_UNROLL
    for (int o = 0; o < kStrip; ++o) {
      LUCID_UNROLL
      for (int b = 0; b < K; ++b)
        if (inside[o + b]) acc[o] += xr[o + b] * w[a * K + b];
    }
  }
  LUCID_UNROLL
  for (int o = 0; o < kStrip; ++o)
    if (col0 + o < s.w) y[((n * s.h + h) * s.w + col0 + o) * s.c + c] = static_cast<T>(acc[o]);
}

// Block `block`'s partial weight gradient of channel c: over its rows, in row then column order,
// each tap's sum of input times output gradient, written to partial[block][c][tap] in FP32.
template <typename T, int K>
LUCID_HOST_DEVICE void weight_partial(const T* __restrict__ x, const T* __restrict__ gy, float* __restrict__ partial,
                                      const Shape& s, int rows_per_block, int block, int c) {
  const int rows = s.n * s.h, r0 = block * rows_per_block;
  const int r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc[K * K];
  LUCID_UNROLL
  for (int t = 0; t < K * K; ++t) acc[t] = 0.f;
  for (int r = r0; r < r1; ++r) {
    const int h = r % s.h, n = r / s.h;
    // xr[a][b]: x at (h + a - K/2, col + b - K/2), 0 outside; column col + K/2 loaded as col advances.
    float xr[K][K];
    bool row_inside[K];
    LUCID_UNROLL
    for (int a = 0; a < K; ++a) {
      row_inside[a] = h + a - K / 2 >= 0 && h + a - K / 2 < s.h;
      LUCID_UNROLL
      for (int b = 0; b < K; ++b) {
        const int wi = b - K / 2 - 1;  // the column before the first, shifted in below
        xr[a][b] = row_inside[a] && wi >= 0 && wi < s.w
                       ? static_cast<float>(x[((n * s.h + h + a - K / 2) * s.w + wi) * s.c + c])
                       : 0.f;
      }
    }
    for (int col = 0; col < s.w; ++col) {
      const int next = col + K / 2;
      LUCID_UNROLL
      for (int a = 0; a < K; ++a) {
        LUCID_UNROLL
        for (int b = 0; b + 1 < K; ++b) xr[a][b] = xr[a][b + 1];
        xr[a][K - 1] = row_inside[a] && next < s.w
                           ? static_cast<float>(x[((n * s.h + h + a - K / 2) * s.w + next) * s.c + c])
                           : 0.f;
      }
      const float g = static_cast<float>(gy[(r * s.w + col) * s.c + c]);
      LUCID_UNROLL
      for (int a = 0; a < K; ++a) {
        if (!row_inside[a]) continue;
        LUCID_UNROLL
        for (int b = 0; b < K; ++b)
          if (col + b - K / 2 >= 0 && col + b - K / 2 < s.w) acc[a * K + b] += xr[a][b] * g;
      }
    }
  }
  LUCID_UNROLL
  for (int t = 0; t < K * K; ++t) partial[(static_cast<int64_t>(block) * s.c + c) * K * K + t] = acc[t];
}

// The second pass sums each weight gradient i (channel-major, then tap) over the row blocks with one
// warp: lane l first adds the partial sums of blocks l, l + 32, l + 64, ... in block order
// (lane_share), then the warp adds its 32 shares as a shuffle tree (offsets 16, 8, 4, 2, 1: each
// lane adds the share of the lane `offset` above it) and lane 0 holds the gradient. The order
// depends on the shape alone; add_shares_as_the_warp is the same tree on the host.
constexpr int kLanes = 32;

LUCID_HOST_DEVICE float lane_share(const float* __restrict__ partial, int64_t blocks, int64_t per_block, int64_t i,
                                   int lane) {
  float sum = 0.f;
  for (int64_t p = lane; p < blocks; p += kLanes) sum += partial[p * per_block + i];
  return sum;
}

inline float add_shares_as_the_warp(const float (&shares)[kLanes]) {
  float v[kLanes];
  for (int l = 0; l < kLanes; ++l) v[l] = shares[l];
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    for (int l = 0; l + offset < kLanes; ++l) v[l] += v[l + offset];  // in lane order: v[l + offset] not yet updated
  return v[0];
}

}  // namespace lucid::model::depthwise
