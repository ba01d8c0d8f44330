#include "lucid/data/warp.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cmath>
#include <vector>

#include "lucid/util/error.h"

namespace lucid::data {

namespace {

void check_image(const torch::Tensor& image, const char* what) {
  if (!image.defined() || image.dim() != 3 || image.scalar_type() != torch::kUInt8 || !image.is_cpu())
    throw std::invalid_argument(std::string(what) + ": expected a uint8 (H, W, C) CPU tensor");
}

// OpenCV's saturate_cast<int>(double) / cvRound: round half to even (the FPU default mode).
inline int round_int(double v) { return static_cast<int>(std::nearbyint(v)); }
inline int round_int(float v) { return static_cast<int>(std::nearbyintf(v)); }

inline uint8_t sat_u8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

constexpr int kResizeBits = 11, kResizeScale = 1 << kResizeBits;  // INTER_RESIZE_COEF_*
// Single-precision fused multiply-add, emulated in double precision (the product of two floats is
// exact in a double, so only the final rounding differs from a true FMA, in rare ties). Portable and
// independent of the compiler's FMA contraction.
inline float fmaf_(float a, float b, float c) { return float(double(a) * double(b) + double(c)); }

// OpenCV (>= 4.11) warp kernels process 16 output pixels per vector step on AVX2; the rest of a row
// takes a scalar path that computes the source position in another order.
constexpr int kWarpLanes = 16;

// Round half to even of 0 <= v < 2^23 by the float magic number (no library call; the default
// rounding mode does the work).
inline int rint_small(float v) {
  volatile float big = 8388608.0f;  // volatile: keep (v + 2^23) - 2^23 from being folded
  const float b = big;
  return int((v + b) - b);
}

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
  int k = int(s);                                       // truncation, then floor
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

}  // namespace

torch::Tensor resize_linear(const torch::Tensor& image_in, int oh, int ow) {
  check_image(image_in, "resize_linear");
  auto image = image_in.contiguous();
  const int ih = int(image.size(0)), iw = int(image.size(1)), cn = int(image.size(2));
  if (oh <= 0 || ow <= 0 || ih <= 0 || iw <= 0) throw std::invalid_argument("resize_linear: empty size");
  if (ih == oh && iw == ow) return image;
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  const double scale_x = 1.0 / (double(ow) / iw), scale_y = 1.0 / (double(oh) / ih);
  const size_t sstride = size_t(iw) * cn;

  // Exact halving: OpenCV switches to its 2x2 area average.
  if (std::abs(scale_x - 2.0) < 1e-15 && std::abs(scale_y - 2.0) < 1e-15) {
    for (int y = 0; y < oh; ++y) {
      const uint8_t* r0 = src + size_t(2 * y) * sstride;
      const uint8_t* r1 = r0 + sstride;
      uint8_t* d = dst + size_t(y) * ow * cn;
      for (int x = 0; x < ow; ++x)
        for (int c = 0; c < cn; ++c) {
          const size_t i = size_t(2 * x) * cn + c;
          d[x * cn + c] = uint8_t((r0[i] + r0[i + cn] + r1[i] + r1[i + cn] + 2) >> 2);
        }
    }
    return out;
  }

  // Horizontal taps.
  std::vector<int> xofs(ow), xa0(ow), xa1(ow);
  for (int dx = 0; dx < ow; ++dx) {
    float fx = float((dx + 0.5) * scale_x - 0.5);
    int sx = int(std::floor(fx));
    fx -= float(sx);
    if (sx < 0) fx = 0.f, sx = 0;
    if (sx >= iw - 1) fx = 0.f, sx = iw - 1;
    xofs[dx] = sx;
    xa0[dx] = round_int((1.f - fx) * kResizeScale);
    xa1[dx] = round_int(fx * kResizeScale);
  }
  const int row_len = ow * cn;
  std::vector<int> rows[2] = {std::vector<int>(row_len), std::vector<int>(row_len)};
  int cached[2] = {-1, -1};
  auto fill_row = [&](int slot, int sy) {
    cached[slot] = sy;
    int* d = rows[slot].data();
    const uint8_t* s = src + size_t(sy) * sstride;
    for (int dx = 0; dx < ow; ++dx) {
      const uint8_t* p = s + size_t(xofs[dx]) * cn;
      const int a0 = xa0[dx], a1 = xa1[dx];
      if (xofs[dx] + 1 < iw)
        for (int c = 0; c < cn; ++c) d[dx * cn + c] = p[c] * a0 + p[cn + c] * a1;
      else
        for (int c = 0; c < cn; ++c) d[dx * cn + c] = p[c] * kResizeScale;
    }
  };
  auto slot_of = [&](int sy) { return cached[0] == sy ? 0 : (cached[1] == sy ? 1 : -1); };
  // OpenCV's vertical pass (its vector form, which covers every element of a row): 16-bit high
  // products of the horizontal sums (shifted right by 4) and the 11-bit weights, then (+2) >> 2.
  for (int dy = 0; dy < oh; ++dy) {
    float fy = float((dy + 0.5) * scale_y - 0.5);
    const int sy = int(std::floor(fy));
    fy -= float(sy);
    const int b0 = round_int((1.f - fy) * kResizeScale), b1 = round_int(fy * kResizeScale);
    const int r0 = std::clamp(sy, 0, ih - 1), r1 = std::clamp(sy + 1, 0, ih - 1);
    int k0 = slot_of(r0);
    if (k0 < 0) fill_row(k0 = (slot_of(r1) == 0 ? 1 : 0), r0);
    int k1 = slot_of(r1);
    if (k1 < 0) fill_row(k1 = 1 - k0, r1);
    const int* s0 = rows[k0].data();
    const int* s1 = rows[k1].data();
    uint8_t* d = dst + size_t(dy) * row_len;
    for (int x = 0; x < row_len; ++x) {
      const int v = (((int16_t(s0[x] >> 4) * b0) >> 16) + ((int16_t(s1[x] >> 4) * b1) >> 16) + 2) >> 2;
      d[x] = sat_u8(v);
    }
  }
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

torch::Tensor warp_affine(const torch::Tensor& image_in, const Matrix3& M, int oh, int ow, uint8_t border) {
  check_image(image_in, "warp_affine");
  auto image = image_in.contiguous();
  const int ih = int(image.size(0)), iw = int(image.size(1)), cn = int(image.size(2));
  const auto m = inverse_affine(M);
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  const int vec_end = (ow / kWarpLanes) * kWarpLanes;
  if (m[1] == 0.f && m[3] == 0.f) {
    // No rotation or shear: the source column depends on x only and the source row on y only (in
    // both of OpenCV's paths), so the cells are computed once per column and once per row.
    std::vector<int> cix(ow);
    std::vector<float> cax(ow);
    std::vector<char> cok(ow);
    for (int x = 0; x < ow; ++x) {
      const float fx = float(x);
      const float sx = x < vec_end ? fmaf_(m[0], fx, 0.f * m[1] + m[2]) : fmaf_(fx, m[0], 0.f * m[1]) + m[2];
      cok[x] = cell(sx, iw, cix[x], cax[x]);
    }
    // Horizontal interpolation of a source row (border outside the source), shared by the output
    // rows that read it; OpenCV blends along x first, so this is the same arithmetic.
    const size_t row_len = size_t(ow) * cn, sstride = size_t(iw) * cn;
    std::vector<float> hbuf[2] = {std::vector<float>(row_len), std::vector<float>(row_len)};
    int cached[2] = {INT_MIN, INT_MIN};
    auto fill_row = [&](int slot, int sy) {
      cached[slot] = sy;
      float* h = hbuf[slot].data();
      if (sy < 0 || sy >= ih) {
        std::fill(h, h + row_len, float(border));
        return;
      }
      const uint8_t* r = src + size_t(sy) * sstride;
      for (int x = 0; x < ow; ++x) {
        float* o = h + size_t(x) * cn;
        if (!cok[x]) {
          for (int c = 0; c < cn; ++c) o[c] = float(border);
          continue;
        }
        const int ix = cix[x];
        const float ax = cax[x];
        const bool x0 = ix >= 0, x1 = ix + 1 < iw;
        const uint8_t* p = r + ptrdiff_t(ix) * cn;
        for (int c = 0; c < cn; ++c) {
          const float p0 = x0 ? float(p[c]) : float(border), p1 = x1 ? float(p[cn + c]) : float(border);
          o[c] = fmaf_(ax, p1 - p0, p0);
        }
      }
    };
    auto slot_of = [&](int sy) { return cached[0] == sy ? 0 : (cached[1] == sy ? 1 : -1); };
    for (int y = 0; y < oh; ++y) {
      const float fy = float(y);
      const float sy = fy * m[4] + m[5];
      uint8_t* d = dst + size_t(y) * row_len;
      int iy;
      float ay;
      if (!cell(sy, ih, iy, ay)) {
        std::memset(d, border, row_len);
        continue;
      }
      int k0 = slot_of(iy);
      if (k0 < 0) fill_row(k0 = (slot_of(iy + 1) == 0 ? 1 : 0), iy);
      int k1 = slot_of(iy + 1);
      if (k1 < 0) fill_row(k1 = 1 - k0, iy + 1);
      const float* h0 = hbuf[k0].data();
      const float* h1 = hbuf[k1].data();
      for (size_t k = 0; k < row_len; ++k) d[k] = sat_u8(rint_small(fmaf_(ay, h1[k] - h0[k], h0[k])));
    }
    return out;
  }
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
  return out;
}

namespace {
bool invert3(const Matrix3& m, Matrix3& inv) {
  const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                     m[2] * (m[3] * m[7] - m[4] * m[6]);
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
  Matrix3 inv{};
  if (!invert3(M, inv)) inv.fill(0.0);
  std::array<float, 9> m;
  for (int i = 0; i < 9; ++i) m[i] = float(inv[i]);
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
    for (int x = 0; x < w; ++x) std::memcpy(d + size_t(w - 1 - x) * cn, s + size_t(x) * cn, cn);
  }
  return out;
}

}  // namespace lucid::data
