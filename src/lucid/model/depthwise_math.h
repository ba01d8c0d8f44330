// The arithmetic of the depthwise kernels (model/depthwise_cuda.cu), written once for the GPU and
// the host: each function computes one output element, one block's partial weight-gradient sums or
// one summed weight gradient, and the kernels call them from their grid loops. The unit tests call
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
constexpr int64_t kWeightGradBlocks = 1024;  // at most this many row blocks in the weight gradient's first pass

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

// Calls visit(tap, offset) for each tap (a, b) of a K x K window centred on (n, h, col) that falls
// inside the image: tap = a * K + b, offset = the channels_last offset of that input pixel's first
// channel. Taps outside are the zero padding and add nothing.
template <int K, typename Visit>
LUCID_HOST_DEVICE void for_each_tap(int n, int h, int col, const Shape& s, Visit&& visit) {
  LUCID_UNROLL
  for (int a = 0; a < K; ++a) {
    const int hi = h + a - K / 2;
    if (hi < 0 || hi >= s.h) continue;
    LUCID_UNROLL
    for (int b = 0; b < K; ++b) {
      const int wi = col + b - K / 2;
      if (wi < 0 || wi >= s.w) continue;
      visit(a * K + b, ((n * s.h + hi) * s.w + wi) * s.c);
    }
  }
}

// Output element i (channels_last order) of the stride-1 convolution with K / 2 zero padding, summed
// in FP32 over the taps in row-major order. flipped: the kernel turned by 180 degrees (tap (a, b)
// takes weight (K-1-a, K-1-b)), which gives the input gradient when x is the output's gradient.
template <typename T, int K>
LUCID_HOST_DEVICE T output_element(const T* __restrict__ x, const T* __restrict__ wt, const Shape& s, bool flipped,
                                   int i) {
  const int c = i % s.c, pixel = i / s.c;
  const int col = pixel % s.w, row = pixel / s.w, h = row % s.h, n = row / s.h;
  const T* wc = wt + c * K * K;
  float acc = 0.f;
  for_each_tap<K>(n, h, col, s, [&](int tap, int pixel_at) {
    const int w_tap = flipped ? K * K - 1 - tap : tap;
    acc += static_cast<float>(x[pixel_at + c]) * static_cast<float>(wc[w_tap]);
  });
  return static_cast<T>(acc);
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
    for (int col = 0; col < s.w; ++col) {
      const float g = static_cast<float>(gy[(r * s.w + col) * s.c + c]);
      for_each_tap<K>(n, h, col, s,
                      [&](int tap, int pixel_at) { acc[tap] += static_cast<float>(x[pixel_at + c]) * g; });
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
