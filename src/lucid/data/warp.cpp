#include "lucid/data/warp.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "lucid/data/resize.h"
#include "lucid/util/error.h"

namespace lucid::data {

namespace {

void check_image(const torch::Tensor& image, const char* what) {
  if (!image.defined() || image.dim() != 3 || image.scalar_type() != torch::kUInt8 || !image.is_cpu())
    throw std::invalid_argument(std::string(what) + ": expected a uint8 (H, W, C) CPU tensor");
}

inline uint8_t sat_u8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// Single-precision fused multiply-add, emulated in double precision (the product of two floats is
// exact in a double, so only the final rounding differs from a true FMA, in rare ties). Portable and
// independent of the compiler's FMA contraction.
inline float fmaf_(float a, float b, float c) { return float(double(a) * double(b) + double(c)); }

using detail::kWarpLanes;

// Round half to even of 0 <= v < 2^23 by the float magic number (no library call; the default
// rounding mode does the work, and without -ffast-math the compiler may not fold the two steps).
inline int rint_small(float v) { return int((v + 8388608.0f) - 8388608.0f); }

// Bilinear value of one channel from its four neighbours (each in [0, 255]), in single precision
// with fused steps (OpenCV's order: along x first, then y), rounded half to even.
inline uint8_t blend(float p00, float p01, float p10, float p11, float ax, float ay) {
  const float v0 = fmaf_(ax, p01 - p00, p00), v1 = fmaf_(ax, p11 - p10, p10);
  return sat_u8(rint_small(fmaf_(ay, v1 - v0, v0)));
}

// One output pixel from the source cell (ix, iy) and fractions (ax, ay); neighbours outside the
// source are `border`.
inline void sample_cell(const uint8_t* src, int h, int w, int cn, int ix, int iy, float ax, float ay, uint8_t border,
                        uint8_t* out) {
  const size_t stride = size_t(w) * cn;
  if (unsigned(ix) < unsigned(w - 1) && unsigned(iy) < unsigned(h - 1)) {
    const uint8_t* r0 = src + size_t(iy) * stride + size_t(ix) * cn;
    const uint8_t* r1 = r0 + stride;
    for (int c = 0; c < cn; ++c) out[c] = blend(r0[c], r0[cn + c], r1[c], r1[cn + c], ax, ay);
    return;
  }
  const bool x0 = ix >= 0 && ix < w, x1 = ix + 1 >= 0 && ix + 1 < w;
  const bool y0 = iy >= 0 && iy < h, y1 = iy + 1 >= 0 && iy + 1 < h;
  const uint8_t* r0 = src + size_t(std::max(iy, 0)) * stride;
  const uint8_t* r1 = src + size_t(std::max(iy + 1, 0)) * stride;
  for (int c = 0; c < cn; ++c) {
    const float p00 = (y0 && x0) ? r0[size_t(ix) * cn + c] : border;
    const float p01 = (y0 && x1) ? r0[size_t(ix + 1) * cn + c] : border;
    const float p10 = (y1 && x0) ? r1[size_t(ix) * cn + c] : border;
    const float p11 = (y1 && x1) ? r1[size_t(ix + 1) * cn + c] : border;
    out[c] = blend(p00, p01, p10, p11, ax, ay);
  }
}

// Source cell of a coordinate; false when the pixel is border whatever the other coordinate (both
// neighbours outside, or not a number).
inline bool cell(float s, int size, int& i, float& a) {
  if (!(s >= -1.f && s < float(size))) return false;  // also rejects NaN
  int k = int(s);                                     // truncation, then floor
  if (float(k) > s) --k;
  i = k;
  a = s - float(k);
  return true;
}

// One output pixel from the source position (sx, sy).
inline void sample_bilinear(const uint8_t* src, int h, int w, int cn, float sx, float sy, uint8_t border,
                            uint8_t* out) {
  int ix, iy;
  float ax, ay;
  if (!cell(sx, w, ix, ax) || !cell(sy, h, iy, ay)) {
    for (int c = 0; c < cn; ++c) out[c] = border;
    return;
  }
  sample_cell(src, h, w, cn, ix, iy, ax, ay, border, out);
}

// The inverse of the affine part of M, as OpenCV computes it (double), then in single precision.
std::array<float, 6> inverse_affine(const Matrix3& M) {
  double D = M[0] * M[4] - M[1] * M[3];
  D = D != 0 ? 1.0 / D : 0.0;
  const double i0 = M[4] * D, i1 = -M[1] * D, i3 = -M[3] * D, i4 = M[0] * D;
  const double i2 = -i0 * M[2] - i1 * M[5], i5 = -i3 * M[2] - i4 * M[5];
  return {float(i0), float(i1), float(i2), float(i3), float(i4), float(i5)};
}

// ---- Affine warp without rotation or shear -------------------------------------------------------
// The source column then depends on x only and the source row on y only (in both of OpenCV's
// paths), so the cells are computed once per column and once per row, and each source row is
// interpolated along x once for all the output rows that read it (OpenCV blends along x first, so
// this is the same arithmetic). The loops run on AVX2 where the CPU has it: the same IEEE single
// and double operations in wider registers (no FMA contraction), so the bytes do not change.

bool g_simd = true;  // detail::set_warp_simd

int vector_end(int ow) { return (ow / kWarpLanes) * kWarpLanes; }
// Source position of output column x / row y (both of OpenCV's paths reduce to these without
// rotation or shear).
inline float separable_x(const std::array<float, 6>& m, int x, int vec_end) {
  const float fx = float(x);
  return x < vec_end ? fmaf_(m[0], fx, 0.f * m[1] + m[2]) : fmaf_(fx, m[0], 0.f * m[1]) + m[2];
}
inline float separable_y(const std::array<float, 6>& m, int y) { return float(y) * m[4] + m[5]; }

bool use_avx2() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has && g_simd;
#else
  return false;
#endif
}

// Along x for 3 channels: h[3x + c] = row[co[x] + c] + ax[x] * (row[co[x] + 3 + c] - row[co[x] + c]).
// `row` has 8 readable bytes at every co[x]; `h` one float beyond 3 * ow.
void horizontal3(const uint8_t* __restrict row, const int32_t* __restrict co, const float* __restrict ax, int ow,
                 float* __restrict h) {
  for (int x = 0; x < ow; ++x) {
    const uint8_t* q = row + co[x];
    for (int c = 0; c < 3; ++c) h[3 * x + c] = fmaf_(ax[x], float(int(q[3 + c]) - int(q[c])), float(q[c]));
  }
}

// Any channel count: one element at a time (co and ax per element, the right neighbour `cn` on).
void horizontal_any(const uint8_t* __restrict row, const int32_t* __restrict co, const float* __restrict ax, size_t n,
                    int cn, float* __restrict h) {
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* q = row + co[k];
    h[k] = fmaf_(ax[k], float(int(q[cn]) - int(q[0])), float(q[0]));
  }
}

// Along y, then rounded half to even and saturated.
void vertical(float ay, const float* __restrict h0, const float* __restrict h1, uint8_t* __restrict d, size_t n) {
  for (size_t k = 0; k < n; ++k) d[k] = sat_u8(rint_small(fmaf_(ay, h1[k] - h0[k], h0[k])));
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void horizontal3_avx2(const uint8_t* __restrict row, const int32_t* __restrict co,
                                                      const float* __restrict ax, int ow, float* __restrict h) {
  for (int x = 0; x < ow; ++x) {
    uint64_t bytes;
    std::memcpy(&bytes, row + co[x], 8);
    const __m128i v = _mm_cvtsi64_si128(int64_t(bytes));
    const __m128i p0 = _mm_cvtepu8_epi32(v), p1 = _mm_cvtepu8_epi32(_mm_srli_si128(v, 3));
    const __m256d d = _mm256_cvtepi32_pd(_mm_sub_epi32(p1, p0)), b = _mm256_cvtepi32_pd(p0);
    const __m256d a = _mm256_set1_pd(double(ax[x]));
    // Lane 3 spills into the next pixel's first channel, which the next step writes.
    _mm_storeu_ps(h + 3 * x, _mm256_cvtpd_ps(_mm256_add_pd(_mm256_mul_pd(a, d), b)));
  }
}

__attribute__((target("avx2"))) void vertical_avx2(float ay, const float* __restrict h0, const float* __restrict h1,
                                                   uint8_t* __restrict d, size_t n) {
  for (size_t k = 0; k < n; ++k) d[k] = sat_u8(rint_small(fmaf_(ay, h1[k] - h0[k], h0[k])));
}
#endif

void warp_separable(const uint8_t* src, int ih, int iw, int cn, const std::array<float, 6>& m, int oh, int ow,
                    uint8_t border, uint8_t* dst) {
  const bool avx2 = use_avx2();
  const int vec_end = vector_end(ow);
  const size_t row_len = size_t(ow) * cn, sstride = size_t(iw) * cn;
  // Source rows are read from a copy with one border pixel on each side, so no neighbour needs a
  // test: co is the left neighbour's offset in that copy, and a column whose two neighbours are both
  // outside (or whose position is not a number) reads the border pixel with fraction 0.
  std::vector<int32_t> co(row_len);
  std::vector<float> ax(row_len);
  int first = iw, last = -1;
  for (int x = 0; x < ow; ++x) {
    int ix;
    float a;
    const bool ok = cell(separable_x(m, x, vec_end), iw, ix, a);
    for (int c = 0; c < cn; ++c) {
      co[size_t(x) * cn + c] = ok ? (ix + 1) * cn + c : c;
      ax[size_t(x) * cn + c] = ok ? a : 0.f;
    }
    if (ok) first = std::min(first, ix), last = std::max(last, ix + 1);
  }
  // Only the source columns some cell reads are copied (the rest of the copy stays border).
  first = std::max(first, 0), last = std::min(last, iw - 1);
  const size_t copy_from = size_t(first) * cn, copy_bytes = last >= first ? size_t(last - first + 1) * cn : 0;
  if (cn == 3)  // one entry per pixel
    for (int x = 0; x < ow; ++x) co[x] = co[size_t(x) * 3], ax[x] = ax[size_t(x) * 3];
  std::vector<uint8_t> padded(sstride + 2 * size_t(cn) + 8, border);
  std::vector<float> hbuf[2] = {std::vector<float>(row_len + 1), std::vector<float>(row_len + 1)};
  int cached[2] = {INT_MIN, INT_MIN};
  auto fill_row = [&](int slot, int sy) {
    cached[slot] = sy;
    float* h = hbuf[slot].data();
    if (sy < 0 || sy >= ih) {
      std::fill(h, h + row_len, float(border));
      return;
    }
    std::memcpy(padded.data() + cn + copy_from, src + size_t(sy) * sstride + copy_from, copy_bytes);
#if defined(__x86_64__)
    if (cn == 3 && avx2) return horizontal3_avx2(padded.data(), co.data(), ax.data(), ow, h);
#endif
    if (cn == 3) return horizontal3(padded.data(), co.data(), ax.data(), ow, h);
    horizontal_any(padded.data(), co.data(), ax.data(), row_len, cn, h);
  };
  auto slot_of = [&](int sy) { return cached[0] == sy ? 0 : (cached[1] == sy ? 1 : -1); };
  for (int y = 0; y < oh; ++y) {
    uint8_t* d = dst + size_t(y) * row_len;
    int iy;
    float ay;
    if (!cell(separable_y(m, y), ih, iy, ay)) {
      std::memset(d, border, row_len);
      continue;
    }
    int k0 = slot_of(iy);
    if (k0 < 0) fill_row(k0 = (slot_of(iy + 1) == 0 ? 1 : 0), iy);
    int k1 = slot_of(iy + 1);
    if (k1 < 0) fill_row(k1 = 1 - k0, iy + 1);
#if defined(__x86_64__)
    if (avx2) {
      vertical_avx2(ay, hbuf[k0].data(), hbuf[k1].data(), d, row_len);
      continue;
    }
#endif
    vertical(ay, hbuf[k0].data(), hbuf[k1].data(), d, row_len);
  }
}

}  // namespace

torch::Tensor resize_linear(const torch::Tensor& image_in, int oh, int ow) {
  check_image(image_in, "resize_linear");
  auto image = image_in.contiguous();
  const int ih = int(image.size(0)), iw = int(image.size(1)), cn = int(image.size(2));
  if (oh <= 0 || ow <= 0 || ih <= 0 || iw <= 0) throw std::invalid_argument("resize_linear: empty size");
  if (ih == oh && iw == ow) return image;
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  resize_linear(image.data_ptr<uint8_t>(), ih, iw, cn, out.data_ptr<uint8_t>(), oh, ow);
  return out;
}

torch::Tensor resize_long_side(const torch::Tensor& image, int imgsz) {
  check_image(image, "resize_long_side");
  const int h0 = int(image.size(0)), w0 = int(image.size(1));
  const double r = double(imgsz) / std::max(h0, w0);
  if (r == 1.0) return image.contiguous();
  const int w = std::min(int(std::ceil(w0 * r)), imgsz), h = std::min(int(std::ceil(h0 * r)), imgsz);
  return resize_linear(image, h, w);
}

namespace {

// Every output pixel on its own (OpenCV's per-pixel order): any affine map.
void warp_pointwise(const uint8_t* src, int ih, int iw, int cn, const std::array<float, 6>& m, int oh, int ow,
                    uint8_t border, uint8_t* dst) {
  const int vec_end = (ow / kWarpLanes) * kWarpLanes;
  for (int y = 0; y < oh; ++y) {
    const float fy = float(y);
    const float ry_x = fy * m[1], ry_y = fy * m[4];  // products rounded before the additions
    const float row_x = ry_x + m[2], row_y = ry_y + m[5];
    uint8_t* d = dst + size_t(y) * ow * cn;
    for (int x = 0; x < ow; ++x) {
      const float fx = float(x);
      float sx, sy;
      if (x < vec_end) {
        sx = fmaf_(m[0], fx, row_x);
        sy = fmaf_(m[3], fx, row_y);
      } else {
        sx = fmaf_(fx, m[0], ry_x) + m[2];
        sy = fmaf_(fx, m[3], ry_y) + m[5];
      }
      sample_bilinear(src, ih, iw, cn, sx, sy, border, d + size_t(x) * cn);
    }
  }
}

torch::Tensor warp_affine_impl(const torch::Tensor& image_in, const Matrix3& M, int oh, int ow, uint8_t border,
                               bool separable_allowed) {
  check_image(image_in, "warp_affine");
  auto image = image_in.contiguous();
  const int ih = int(image.size(0)), iw = int(image.size(1)), cn = int(image.size(2));
  const auto m = inverse_affine(M);
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  if (separable_allowed && m[1] == 0.f && m[3] == 0.f)
    warp_separable(src, ih, iw, cn, m, oh, ow, border, dst);
  else
    warp_pointwise(src, ih, iw, cn, m, oh, ow, border, dst);
  return out;
}

}  // namespace

torch::Tensor warp_affine(const torch::Tensor& image, const Matrix3& M, int oh, int ow, uint8_t border) {
  return warp_affine_impl(image, M, oh, ow, border, true);
}

namespace {
bool invert3(const Matrix3& m, Matrix3& inv) {
  const double det =
      m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
  if (det == 0) return false;
  const double id = 1.0 / det;
  inv = {(m[4] * m[8] - m[5] * m[7]) * id, (m[2] * m[7] - m[1] * m[8]) * id, (m[1] * m[5] - m[2] * m[4]) * id,
         (m[5] * m[6] - m[3] * m[8]) * id, (m[0] * m[8] - m[2] * m[6]) * id, (m[2] * m[3] - m[0] * m[5]) * id,
         (m[3] * m[7] - m[4] * m[6]) * id, (m[1] * m[6] - m[0] * m[7]) * id, (m[0] * m[4] - m[1] * m[3]) * id};
  return true;
}
}  // namespace

torch::Tensor warp_perspective(const torch::Tensor& image_in, const Matrix3& M, int oh, int ow, uint8_t border) {
  check_image(image_in, "warp_perspective");
  auto image = image_in.contiguous();
  const int ih = int(image.size(0)), iw = int(image.size(1)), cn = int(image.size(2));
  const auto m = detail::inverse_map(M, /*perspective=*/true);
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  for (int y = 0; y < oh; ++y) {
    const float fy = float(y);
    const float row_x = fy * m[1] + m[2], row_y = fy * m[4] + m[5], row_w = fy * m[7] + m[8];
    uint8_t* d = dst + size_t(y) * ow * cn;
    for (int x = 0; x < ow; ++x) {
      const float fx = float(x);
      const float w = fmaf_(m[6], fx, row_w);
      const float sx = fmaf_(m[0], fx, row_x) / w, sy = fmaf_(m[3], fx, row_y) / w;
      sample_bilinear(src, ih, iw, cn, sx, sy, border, d + size_t(x) * cn);
    }
  }
  return out;
}

std::array<int, 4> warp_affine_source_window(const Matrix3& M, int ih, int iw, int oh, int ow) {
  const auto m = inverse_affine(M);
  if (m[1] != 0.f || m[3] != 0.f) return {0, 0, iw, ih};
  // The cells the separable path reads, and their right / lower neighbours.
  int x0 = iw, x1 = 0, y0 = ih, y1 = 0;
  const int vec_end = vector_end(ow);
  for (int x = 0; x < ow; ++x) {
    int i;
    float a;
    if (cell(separable_x(m, x, vec_end), iw, i, a)) x0 = std::min(x0, i), x1 = std::max(x1, i + 2);
  }
  for (int y = 0; y < oh; ++y) {
    int i;
    float a;
    if (cell(separable_y(m, y), ih, i, a)) y0 = std::min(y0, i), y1 = std::max(y1, i + 2);
  }
  x0 = std::max(x0, 0), y0 = std::max(y0, 0), x1 = std::min(x1, iw), y1 = std::min(y1, ih);
  if (x0 >= x1 || y0 >= y1) return {0, 0, 0, 0};
  return {x0, y0, x1, y1};
}

namespace detail {
std::array<float, 9> inverse_map(const Matrix3& M, bool perspective) {
  if (!perspective) {
    const auto a = inverse_affine(M);
    return {a[0], a[1], a[2], a[3], a[4], a[5], 0.f, 0.f, 1.f};
  }
  Matrix3 inv{};
  if (!invert3(M, inv)) inv.fill(0.0);
  std::array<float, 9> m;
  for (int i = 0; i < 9; ++i) m[i] = float(inv[i]);
  return m;
}

torch::Tensor warp_affine_pointwise(const torch::Tensor& image, const Matrix3& M, int oh, int ow, uint8_t border) {
  return warp_affine_impl(image, M, oh, ow, border, false);
}

bool set_warp_simd(bool on) {
  const bool was = g_simd;
  g_simd = on;
  return was;
}
}  // namespace detail

torch::Tensor flip_image(const torch::Tensor& image, bool horizontal) {
  check_image(image, "flip_image");
  // Plain loops: no intra-op thread pool inside loader workers.
  auto src_t = image.contiguous();
  const int h = int(src_t.size(0)), w = int(src_t.size(1)), cn = int(src_t.size(2));
  auto out = torch::empty({h, w, cn}, torch::kUInt8);
  const uint8_t* src = src_t.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  const size_t row = size_t(w) * cn;
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = src + size_t(y) * row;
    uint8_t* d = dst + size_t(horizontal ? y : h - 1 - y) * row;
    if (!horizontal) {
      std::memcpy(d, s, row);
      continue;
    }
    if (cn == 3) {  // the common case, without a call per pixel
      for (int x = 0; x < w; ++x) {
        const uint8_t* p = s + size_t(x) * 3;
        uint8_t* q = d + size_t(w - 1 - x) * 3;
        q[0] = p[0], q[1] = p[1], q[2] = p[2];
      }
      continue;
    }
    for (int x = 0; x < w; ++x) std::memcpy(d + size_t(w - 1 - x) * cn, s + size_t(x) * cn, cn);
  }
  return out;
}

}  // namespace lucid::data
