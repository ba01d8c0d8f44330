#include "lucid/data/hsv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lucid::data {

namespace {

using torch::Tensor;

constexpr int kHsvShift = 12;

// OpenCV's 8-bit division tables: sdiv[v] = round(255 * 2^12 / v), hdiv[d] = round(180 * 2^12 / (6 d)).
Tensor division_table(bool hue) {
  auto t = torch::zeros({256}, torch::kInt32);
  auto* p = t.data_ptr<int32_t>();
  for (int i = 1; i < 256; ++i)
    p[i] = int32_t(std::nearbyint(hue ? double(180 << kHsvShift) / (6.0 * i) : double(255 << kHsvShift) / i));
  return t;
}

Tensor to_device(Tensor t, const torch::Device& device) {
  if (device.is_cpu()) return t;
  return t.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

Tensor hsv_tables(const Tensor& gains_in) {
  if (gains_in.dim() != 2 || gains_in.size(1) != 3) throw std::invalid_argument("hsv_tables: gains must be (B, 3)");
  auto gains = gains_in.to(torch::kCPU, torch::kDouble).contiguous();
  const int64_t B = gains.size(0);
  auto luts = torch::empty({B, 3, 256}, torch::kUInt8);
  auto* g = gains.data_ptr<double>();
  auto* l = luts.data_ptr<uint8_t>();
  for (int64_t b = 0; b < B; ++b) {
    const double rh = g[b * 3], rs = g[b * 3 + 1], rv = g[b * 3 + 2];
    uint8_t* lh = l + b * 768;
    uint8_t* ls = lh + 256;
    uint8_t* lv = ls + 256;
    for (int x = 0; x < 256; ++x) {
      double h = std::fmod(x + rh * 180.0, 180.0);  // Python's modulo: result in [0, 180)
      if (h < 0) h += 180.0;
      lh[x] = uint8_t(h);
      ls[x] = uint8_t(std::clamp(x * (rs + 1.0), 0.0, 255.0));
      lv[x] = uint8_t(std::clamp(x * (rv + 1.0), 0.0, 255.0));
    }
    ls[0] = 0;
  }
  return luts;
}

namespace {

void check_args(const Tensor& images, const Tensor& gains) {
  if (images.dim() != 4 || images.size(1) != 3 || images.scalar_type() != torch::kUInt8)
    throw std::invalid_argument("hsv_augment: images must be (B, 3, H, W) uint8");
  if (gains.dim() != 2 || gains.size(0) != images.size(0) || gains.size(1) != 3)
    throw std::invalid_argument("hsv_augment: gains must be (B, 3)");
}

// The same arithmetic as hsv_augment_ops, pixel by pixel.
Tensor hsv_augment_cpu(const Tensor& images_in, const Tensor& gains) {
  auto images = images_in.contiguous();
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3), plane = H * W;
  auto luts = hsv_tables(gains);
  auto sdiv = division_table(false), hdiv = division_table(true);
  const int32_t* sd = sdiv.data_ptr<int32_t>();
  const int32_t* hd = hdiv.data_ptr<int32_t>();
  auto out = torch::empty_like(images);
  const int64_t vec_w = (W / 32) * 32;
  constexpr int half = 1 << (kHsvShift - 1);
  static const int kSector[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* lh = luts.data_ptr<uint8_t>() + b * 768;
    const uint8_t* ls = lh + 256;
    const uint8_t* lv = ls + 256;
    const uint8_t* in = images.data_ptr<uint8_t>() + b * 3 * plane;
    uint8_t* o = out.data_ptr<uint8_t>() + b * 3 * plane;
    for (int64_t p = 0; p < plane; ++p) {
      const int r = in[p], g = in[plane + p], bl = in[2 * plane + p];
      const int v = std::max(std::max(r, g), bl), vmin = std::min(std::min(r, g), bl), diff = v - vmin;
      const int s = (diff * sd[v] + half) >> kHsvShift;
      int h = v == r ? g - bl : (v == g ? bl - r + 2 * diff : r - g + 4 * diff);
      h = (h * hd[diff] + half) >> kHsvShift;
      if (h < 0) h += 180;
      const float hq = lh[h], sq = float(ls[s]) * (1.0f / 255.0f), vq = float(lv[v]) * (1.0f / 255.0f);
      const float hh = hq * (6.0f / 180.0f);
      const float sector = std::trunc(hh), frac = hh - sector;
      const int sec = int(sector) % 6;
      float t[4];
      t[0] = vq;
      t[1] = vq * (1.0f - sq);
      t[2] = vq * float(1.0 - double(sq) * double(frac));
      t[3] = vq * float(1.0 - double(sq) * double(1.0f - frac));
      const bool vec = (p % W) < vec_w;
      for (int c = 0; c < 3; ++c) {  // output r, g, b from the (b, g, r) table
        const float x = t[kSector[sec][2 - c]] * 255.0f;
        const float q = vec ? std::trunc(x) : std::nearbyint(x);
        o[c * plane + p] = uint8_t(std::clamp(q, 0.0f, 255.0f));
      }
    }
  }
  return out;
}

}  // namespace

Tensor hsv_augment(const Tensor& images, const Tensor& gains) {
  check_args(images, gains);
  if (images.is_cpu()) return hsv_augment_cpu(images, gains);
  return hsv_augment_ops(images, gains);
}

Tensor hsv_augment_ops(const Tensor& images, const Tensor& gains) {
  if (images.dim() != 4 || images.size(1) != 3 || images.scalar_type() != torch::kUInt8)
    throw std::invalid_argument("hsv_augment: images must be (B, 3, H, W) uint8");
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3);
  if (gains.dim() != 2 || gains.size(0) != B || gains.size(1) != 3)
    throw std::invalid_argument("hsv_augment: gains must be (B, 3)");
  if (B == 0) return images.clone();
  const auto dev = images.device();
  const auto iopts = torch::TensorOptions().dtype(torch::kInt32).device(dev);

  auto luts = to_device(hsv_tables(gains), dev).to(torch::kInt32).view({B, 3 * 256});
  auto sdiv = to_device(division_table(false), dev);
  auto hdiv = to_device(division_table(true), dev);

  auto x = images.reshape({B, 3, H * W}).to(torch::kInt32);
  auto r = x.select(1, 0), g = x.select(1, 1), b = x.select(1, 2);
  auto v = torch::max(torch::max(r, g), b);
  auto vmin = torch::min(torch::min(r, g), b);
  auto diff = v - vmin;
  constexpr int half = 1 << (kHsvShift - 1);
  auto s = (diff * sdiv.index_select(0, v.reshape({-1})).view_as(v) + half).__rshift__(kHsvShift);
  auto h = torch::where(v == r, g - b, torch::where(v == g, b - r + 2 * diff, r - g + 4 * diff));
  h = (h * hdiv.index_select(0, diff.reshape({-1})).view_as(diff) + half).__rshift__(kHsvShift);
  h = torch::where(h < 0, h + 180, h);

  // Per-image look-up: offsets of each image's tables in the flat (B, 768) view.
  auto base = (torch::arange(B, iopts.dtype(torch::kLong)) * 768).view({B, 1});
  auto flat = luts.reshape({-1});
  auto hq = flat.take(h.to(torch::kLong) + base).to(torch::kFloat);
  auto sq = flat.take(s.to(torch::kLong) + (base + 256)).to(torch::kFloat) * (1.0f / 255.0f);
  auto vq = flat.take(v.to(torch::kLong) + (base + 512)).to(torch::kFloat) * (1.0f / 255.0f);

  // Sector formula in single precision, as OpenCV's vectorised 8-bit HSV -> RGB: s * h and
  // s * (1 - h) fused with the subtraction from 1 (emulated in double precision), results scaled by 255
  // and truncated; the last W % 32 pixels of each row take OpenCV's scalar path, which rounds.
  auto hh = hq * (6.0f / 180.0f);
  auto sector = hh.trunc();
  auto frac = hh - sector;
  auto sec = sector.to(torch::kInt32).remainder(6);
  auto sd = sq.to(torch::kDouble);
  auto t0 = vq;
  auto t1 = vq * (1.0f - sq);
  auto t2 = vq * (1.0 - sd * frac.to(torch::kDouble)).to(torch::kFloat);
  auto t3 = vq * (1.0 - sd * (1.0f - frac).to(torch::kDouble)).to(torch::kFloat);
  const Tensor t[4] = {t0, t1, t2, t3};
  // OpenCV's sector table: which of t0..t3 feeds (b, g, r) in sectors 0..5.
  static const int kSector[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
  auto pick = [&](int c) {
    Tensor out = t[kSector[5][c]];
    for (int k = 4; k >= 0; --k) out = torch::where(sec == k, t[kSector[k][c]], out);
    return out;
  };
  auto rgb = torch::stack({pick(2), pick(1), pick(0)}, 1) * 255.0f;  // (B, 3, HW)
  const int64_t vec_w = (W / 32) * 32;
  Tensor res;
  if (vec_w == W) {
    res = rgb.trunc();
  } else {
    auto col = torch::arange(H * W, iopts.dtype(torch::kLong)).remainder(W);
    res = torch::where(col < vec_w, rgb.trunc(), rgb.round());
  }
  return res.clamp(0, 255).to(torch::kUInt8).view({B, 3, H, W});
}

}  // namespace lucid::data
