#include "lucid/data/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lucid/util/error.h"

namespace lucid::data {

namespace {

constexpr int kCoefBits = 11;
constexpr int kCoefScale = 1 << kCoefBits;  // weights are 11-bit fixed point

struct Tap {
  int s;           // first source index
  int16_t w0, w1;  // weights of s and s + 1 (sum kCoefScale)
};

int16_t weight(float w) { return int16_t(std::nearbyint(w * float(kCoefScale))); }  // round half to even

// Source taps of each destination index, computed as OpenCV does: the centre mapping in double,
// rounded to float; columns clamp to the edge with full weight, rows only clamp their index.
std::vector<Tap> taps(int dst, int src, bool clamp_weights) {
  const double scale = 1.0 / (double(dst) / double(src));
  std::vector<Tap> t(static_cast<size_t>(dst));
  for (int d = 0; d < dst; ++d) {
    float f = float((d + 0.5) * scale - 0.5);
    int s = int(std::floor(f));
    f -= float(s);
    if (clamp_weights) {
      if (s < 0) f = 0, s = 0;
      if (s >= src - 1) f = 0, s = src - 1;
    }
    t[size_t(d)] = {s, weight(1.0f - f), weight(f)};
  }
  return t;
}

int16_t sat16(int v) { return int16_t(std::clamp(v, -32768, 32767)); }

}  // namespace

std::pair<int, int> long_side_size(int width, int height, int imgsz) {
  const double r = double(imgsz) / double(std::max(width, height));
  if (r == 1.0) return {width, height};
  return {std::min(int(std::ceil(width * r)), imgsz), std::min(int(std::ceil(height * r)), imgsz)};
}

void resize_linear(const uint8_t* src, int H, int W, int c, uint8_t* dst, int oh, int ow) {
  const size_t sstride = size_t(W) * c;
  // OpenCV averages 2x2 blocks instead when both sides halve exactly.
  if (W == 2 * ow && H == 2 * oh) {
    for (int y = 0; y < oh; ++y) {
      const uint8_t* r0 = src + size_t(2 * y) * sstride;
      const uint8_t* r1 = r0 + sstride;
      uint8_t* d = dst + size_t(y) * ow * c;
      for (int x = 0; x < ow; ++x)
        for (int k = 0; k < c; ++k) {
          const size_t i = size_t(2 * x) * c + k;
          d[x * c + k] = uint8_t((r0[i] + r0[i + c] + r1[i] + r1[i + c] + 2) >> 2);
        }
    }
    return;
  }
  const auto tx = taps(ow, W, true), ty = taps(oh, H, false);
  // Horizontal pass per source row (integer, exact), cached for the two rows in use.
  const int rw = ow * c;
  std::vector<int32_t> rows[2] = {std::vector<int32_t>(size_t(rw)), std::vector<int32_t>(size_t(rw))};
  int cached[2] = {-1, -1};
  auto hrow = [&](int sy, int keep) -> const int32_t* {  // keep: a row that must stay cached
    for (int k = 0; k < 2; ++k)
      if (cached[k] == sy) return rows[k].data();
    const int k = cached[0] == keep ? 1 : 0;
    int32_t* d = rows[k].data();
    const uint8_t* s = src + size_t(sy) * sstride;
    for (int x = 0; x < ow; ++x) {
      const Tap& t = tx[size_t(x)];
      const uint8_t* p = s + size_t(t.s) * c;
      if (t.s + 1 < W) {
        for (int k2 = 0; k2 < c; ++k2) d[x * c + k2] = p[k2] * t.w0 + p[k2 + c] * t.w1;
      } else {
        for (int k2 = 0; k2 < c; ++k2) d[x * c + k2] = p[k2] * kCoefScale;
      }
    }
    cached[k] = sy;
    return d;
  };
  for (int y = 0; y < oh; ++y) {
    const Tap& t = ty[size_t(y)];
    const int y0 = std::clamp(t.s, 0, H - 1), y1 = std::clamp(t.s + 1, 0, H - 1);
    const int32_t* r0 = hrow(y0, -2);
    const int32_t* r1 = hrow(y1, y0);
    uint8_t* o = dst + size_t(y) * rw;
    // OpenCV's vector path: 16-bit products keeping their high half, then a rounding shift by 2.
    for (int x = 0; x < rw; ++x) {
      const int a = (int(sat16(r0[x] >> 4)) * t.w0) >> 16;
      const int b = (int(sat16(r1[x] >> 4)) * t.w1) >> 16;
      const int v = (int(sat16(a + b)) + 2) >> 2;
      o[x] = uint8_t(std::clamp(v, 0, 255));
    }
  }
}

Image resize_linear(const Image& src, int ow, int oh) {
  if (ow <= 0 || oh <= 0 || src.width <= 0 || src.height <= 0) throw UserError("resize: empty image or size");
  if (ow == src.width && oh == src.height) return src;
  Image out(oh, ow, src.channels);
  resize_linear(src.pixels.data(), src.height, src.width, src.channels, out.pixels.data(), oh, ow);
  return out;
}

}  // namespace lucid::data
