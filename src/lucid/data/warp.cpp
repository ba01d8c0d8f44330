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
constexpr int kInterBits = 5, kInterTab = 1 << kInterBits;        // 1/32 pixel positions
constexpr int kRemapBits = 15;                                    // INTER_REMAP_COEF_BITS
constexpr int kAbBits = 10, kAbScale = 1 << kAbBits;              // warpAffine's coordinate steps

// Bilinear weights of a 1/32 sub-pixel position (exact in 15 bits: products of (32 - i) and i).
struct RemapTable {
  std::array<std::array<int, 4>, kInterTab * kInterTab> w;
  RemapTable() {
    for (int i = 0; i < kInterTab; ++i)
      for (int j = 0; j < kInterTab; ++j) {
        const int scale = (1 << kRemapBits) / (kInterTab * kInterTab);  // 32
        w[i * kInterTab + j] = {(kInterTab - i) * (kInterTab - j) * scale, (kInterTab - i) * j * scale,
                                i * (kInterTab - j) * scale, i * j * scale};
      }
  }
};
const RemapTable& remap_table() {
  static const RemapTable t;
  return t;
}

// One output pixel from the source position (X, Y) in 1/32 pixels; neighbours outside = border.
inline void sample_bilinear(const uint8_t* src, int h, int w, int cn, int X, int Y, uint8_t border,
                            uint8_t* out) {
  const int sx = X >> kInterBits, sy = Y >> kInterBits;
  const auto& wt = remap_table().w[(Y & (kInterTab - 1)) * kInterTab + (X & (kInterTab - 1))];
  constexpr int half = 1 << (kRemapBits - 1);
  const size_t stride = size_t(w) * cn;
  if (unsigned(sx) < unsigned(std::max(w - 1, 0)) && unsigned(sy) < unsigned(std::max(h - 1, 0))) {
    const uint8_t* p0 = src + sy * stride + size_t(sx) * cn;
    const uint8_t* p1 = p0 + stride;
    for (int c = 0; c < cn; ++c)
      out[c] = sat_u8((p0[c] * wt[0] + p0[cn + c] * wt[1] + p1[c] * wt[2] + p1[cn + c] * wt[3] + half) >> kRemapBits);
    return;
  }
  if (sx >= w || sx + 1 < 0 || sy >= h || sy + 1 < 0) {
    for (int c = 0; c < cn; ++c) out[c] = border;
    return;
  }
  const bool x0 = sx >= 0, x1 = sx + 1 < w, y0 = sy >= 0, y1 = sy + 1 < h;
  for (int c = 0; c < cn; ++c) {
    const int v0 = (y0 && x0) ? src[sy * stride + size_t(sx) * cn + c] : border;
    const int v1 = (y0 && x1) ? src[sy * stride + size_t(sx + 1) * cn + c] : border;
    const int v2 = (y1 && x0) ? src[(sy + 1) * stride + size_t(sx) * cn + c] : border;
    const int v3 = (y1 && x1) ? src[(sy + 1) * stride + size_t(sx + 1) * cn + c] : border;
    out[c] = sat_u8((v0 * wt[0] + v1 * wt[1] + v2 * wt[2] + v3 * wt[3] + half) >> kRemapBits);
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
  // OpenCV's vertical pass: 128-bit vector lanes (16, then 8 elements) use 16-bit high products,
  // the remaining elements of a row the exact 22-bit rounding.
  int vec_end = (row_len / 16) * 16;
  if (vec_end < row_len - 8) vec_end += 8;
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
    for (int x = 0; x < vec_end; ++x) {
      const int v = (((int16_t(s0[x] >> 4) * b0) >> 16) + ((int16_t(s1[x] >> 4) * b1) >> 16) + 2) >> 2;
      d[x] = sat_u8(v);
    }
    for (int x = vec_end; x < row_len; ++x)
      d[x] = sat_u8(int((int64_t(s0[x]) * b0 + int64_t(s1[x]) * b1 + (1 << 21)) >> 22));
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
  // Inverse of the 2x3 affine part, as OpenCV computes it.
  double D = M[0] * M[4] - M[1] * M[3];
  D = D != 0 ? 1.0 / D : 0.0;
  const double a11 = M[4] * D, a22 = M[0] * D;
  const double i0 = a11, i1 = -M[1] * D, i3 = -M[3] * D, i4 = a22;
  const double i2 = -i0 * M[2] - i1 * M[5], i5 = -i3 * M[2] - i4 * M[5];

  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  std::vector<int> adelta(ow), bdelta(ow);
  for (int x = 0; x < ow; ++x) {
    adelta[x] = round_int(i0 * x * kAbScale);
    bdelta[x] = round_int(i3 * x * kAbScale);
  }
  const int round_delta = kAbScale / kInterTab / 2;
  for (int y = 0; y < oh; ++y) {
    const int X0 = round_int((i1 * y + i2) * kAbScale) + round_delta;
    const int Y0 = round_int((i4 * y + i5) * kAbScale) + round_delta;
    uint8_t* d = dst + size_t(y) * ow * cn;
    for (int x = 0; x < ow; ++x) {
      const int X = (X0 + adelta[x]) >> (kAbBits - kInterBits);
      const int Y = (Y0 + bdelta[x]) >> (kAbBits - kInterBits);
      sample_bilinear(src, ih, iw, cn, X, Y, border, d + size_t(x) * cn);
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
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  for (int y = 0; y < oh; ++y) {
    const double bx = inv[1] * y + inv[2], by = inv[4] * y + inv[5], bw = inv[7] * y + inv[8];
    uint8_t* d = dst + size_t(y) * ow * cn;
    for (int x = 0; x < ow; ++x) {
      double W = inv[6] * x + bw;
      W = W != 0 ? kInterTab / W : 0.0;
      const double fx = std::max(double(INT_MIN), std::min(double(INT_MAX), (inv[0] * x + bx) * W));
      const double fy = std::max(double(INT_MIN), std::min(double(INT_MAX), (inv[3] * x + by) * W));
      sample_bilinear(src, ih, iw, cn, round_int(fx), round_int(fy), border, d + size_t(x) * cn);
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
