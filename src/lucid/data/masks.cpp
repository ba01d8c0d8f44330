#include "lucid/data/masks.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace lucid::data {

namespace {

// Zero-filled tensor without ATen's intra-op thread pool (masks are made on loader workers).
torch::Tensor zeros(torch::IntArrayRef shape, torch::ScalarType dtype) {
  auto t = torch::empty(shape, dtype);
  if (t.numel()) std::memset(t.data_ptr(), 0, size_t(t.numel()) * t.element_size());
  return t;
}

constexpr int kShift = 16;  // fixed-point fraction bits of the scanline x positions
constexpr int64_t kOne = int64_t(1) << kShift;

// A window [x0, x0 + w) x [y0, y0 + h) of a virtual height x width image; writes outside the window
// are dropped (the rasteriser never makes any when the window covers the polygon's vertices).
struct Canvas {
  int height, width;
  int x0, y0, w, h;
  uint8_t* data;
  uint8_t color;
  void put(int x, int y) const {
    x -= x0;
    y -= y0;
    if (unsigned(x) < unsigned(w) && unsigned(y) < unsigned(h)) data[size_t(y) * w + x] = color;
  }
  void span(int y, int xa, int xb) const {  // xa..xb inclusive, already clipped to the image
    y -= y0;
    if (unsigned(y) >= unsigned(h)) return;
    xa = std::max(xa - x0, 0);
    xb = std::min(xb - x0, w - 1);
    if (xa <= xb) std::fill(data + size_t(y) * w + xa, data + size_t(y) * w + xb + 1, color);
  }
};

struct Pt {
  int64_t x, y;
};

// Cohen-Sutherland style clipping of a segment to [0, width - 1] x [0, height - 1] with integer
// arithmetic (divisions truncate toward zero); updates the endpoints in place step by step and
// returns whether the segment lies in the image (the endpoints are updated even when it does not).
bool clip_line(int width, int height, Pt& p1, Pt& p2) {
  const int64_t right = width - 1, bottom = height - 1;
  if (width <= 0 || height <= 0) return false;
  auto code = [&](const Pt& p) { return (p.x < 0) + (p.x > right) * 2 + (p.y < 0) * 4 + (p.y > bottom) * 8; };
  int c1 = code(p1), c2 = code(p2);
  if ((c1 & c2) == 0 && (c1 | c2) != 0) {
    if (c1 & 12) {
      const int64_t a = c1 < 8 ? 0 : bottom;
      p1.x += (a - p1.y) * (p2.x - p1.x) / (p2.y - p1.y);
      p1.y = a;
      c1 = (p1.x < 0) + (p1.x > right) * 2;
    }
    if (c2 & 12) {
      const int64_t a = c2 < 8 ? 0 : bottom;
      p2.x += (a - p2.y) * (p2.x - p1.x) / (p2.y - p1.y);
      p2.y = a;
      c2 = (p2.x < 0) + (p2.x > right) * 2;
    }
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
      if (c1) {
        const int64_t a = c1 == 1 ? 0 : right;
        p1.y += (a - p1.x) * (p2.y - p1.y) / (p2.x - p1.x);
        p1.x = a;
        c1 = 0;
      }
      if (c2) {
        const int64_t a = c2 == 1 ? 0 : right;
        p2.y += (a - p2.x) * (p2.y - p1.y) / (p2.x - p1.x);
        p2.x = a;
        c2 = 0;
      }
    }
  }
  return (c1 | c2) == 0;
}

// 8-connected line from the left endpoint, error term starting at major - 2 minor and a minor step
// taken whenever the error is negative (OpenCV's LineIterator).
void draw_line(const Canvas& cv, Pt p1, Pt p2) {
  if (p1.x < 0 || p1.x >= cv.width || p2.x < 0 || p2.x >= cv.width || p1.y < 0 || p1.y >= cv.height || p2.y < 0 ||
      p2.y >= cv.height) {
    if (!clip_line(cv.width, cv.height, p1, p2)) return;
  }
  int64_t dx = p2.x - p1.x, dy = p2.y - p1.y;
  if (dx < 0) {
    std::swap(p1, p2);
    dx = -dx;
    dy = -dy;
  }
  const int64_t sy = dy < 0 ? -1 : 1;
  dy = dy < 0 ? -dy : dy;
  const bool steep = dy > dx;
  const int64_t major = steep ? dy : dx, minor = steep ? dx : dy;
  int64_t err = major - 2 * minor;
  int64_t x = p1.x, y = p1.y;
  for (int64_t i = 0; i <= major; ++i) {
    cv.put(int(x), int(y));
    const bool step_minor = err < 0;
    err += -2 * minor + (step_minor ? 2 * major : 0);
    if (steep) {
      y += sy;
      if (step_minor) x += 1;
    } else {
      x += 1;
      if (step_minor) y += sy;
    }
  }
}

struct Edge {
  int y0, y1;
  int64_t x, dx;
};

void fill_polygon_canvas(const Canvas& cv, const int32_t* xy, int n) {
  if (n <= 0) return;
  std::vector<Edge> edges;
  edges.reserve(n);
  Pt prev{xy[2 * (n - 1)], xy[2 * (n - 1) + 1]};
  for (int i = 0; i < n; ++i) {
    const Pt cur{xy[2 * i], xy[2 * i + 1]};
    draw_line(cv, prev, cur);
    // Scanline edge, from the endpoints clipped to the image when one lies outside.
    Pt t0 = prev, t1 = cur;
    int64_t y0c = prev.y, y1c = cur.y;
    if (t0.x < 0 || t0.x >= cv.width || t1.x < 0 || t1.x >= cv.width || t0.y < 0 || t0.y >= cv.height || t1.y < 0 ||
        t1.y >= cv.height) {
      clip_line(cv.width, cv.height, t0, t1);
      if (t0.y != t1.y) {
        y0c = t0.y;
        y1c = t1.y;
      }
    }
    const int64_t x0c = t0.x * kOne, x1c = t1.x * kOne;
    if (prev.y != cur.y) {
      Edge e;
      e.dx = (x1c - x0c) / (y1c - y0c);
      if (prev.y < cur.y) {
        e.y0 = int(prev.y);
        e.y1 = int(cur.y);
        e.x = x0c + (prev.y - y0c) * e.dx;
      } else {
        e.y0 = int(cur.y);
        e.y1 = int(prev.y);
        e.x = x1c + (cur.y - y1c) * e.dx;
      }
      edges.push_back(e);
    }
    prev = cur;
  }
  if (edges.size() < 2) return;
  int y_min = INT_MAX, y_max = INT_MIN;
  int64_t x_min = INT64_MAX, x_max = INT64_MIN;
  for (const auto& e : edges) {
    const int64_t x_end = e.x + int64_t(e.y1 - e.y0) * e.dx;
    y_min = std::min(y_min, e.y0);
    y_max = std::max(y_max, e.y1);
    x_min = std::min({x_min, e.x, x_end});
    x_max = std::max({x_max, e.x, x_end});
  }
  if (y_max < 0 || y_min >= cv.height || x_max < 0 || x_min >= int64_t(cv.width) * kOne) return;
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.y0 < b.y0; });
  y_max = std::min(y_max, cv.height);
  std::vector<Edge> active;
  std::vector<int64_t> xs;
  size_t next = 0;
  for (int y = y_min; y < y_max; ++y) {
    // Edges are active on [y0, y1).
    active.erase(std::remove_if(active.begin(), active.end(), [y](const Edge& e) { return e.y1 == y; }), active.end());
    while (next < edges.size() && edges[next].y0 == y) active.push_back(edges[next++]);
    if (y >= 0 && y >= cv.y0 && y < cv.y0 + cv.h) {
      xs.clear();
      for (const auto& e : active) xs.push_back(e.x);
      std::sort(xs.begin(), xs.end());
      for (size_t k = 0; k + 1 < xs.size(); k += 2) {
        int xa = int((xs[k] + kOne - 1) >> kShift), xb = int(xs[k + 1] >> kShift);
        if (xa < cv.width && xb >= 0) cv.span(y, std::max(xa, 0), std::min(xb, cv.width - 1));
      }
    }
    for (auto& e : active) e.x += e.dx;
  }
}

}  // namespace

void fill_polygon(uint8_t* image, int height, int width, const std::vector<int32_t>& xy, uint8_t color) {
  Canvas cv{height, width, 0, 0, width, height, image, color};
  fill_polygon_canvas(cv, xy.data(), int(xy.size() / 2));
}

std::vector<int32_t> truncate_vertices(const std::vector<float>& polygon) {
  std::vector<int32_t> out(polygon.size());
  for (size_t i = 0; i < polygon.size(); ++i) {
    const float v = polygon[i];
    // numpy's float -> int32 cast truncates; out-of-range values are clamped here (never reached
    // by clipped coordinates).
    out[i] = v >= 2147483520.f ? INT32_MAX : (v <= -2147483648.f ? INT32_MIN : int32_t(v));
  }
  return out;
}

InstanceMask rasterize_instance(const std::vector<float>& polygon, int height, int width, int ratio) {
  if (ratio <= 0 || height % ratio || width % ratio)
    throw std::invalid_argument("rasterize_instance: image size must be a multiple of the mask ratio");
  InstanceMask m;
  const int n = int(polygon.size() / 2);
  if (n == 0) return m;
  const auto xy = truncate_vertices(polygon);
  int64_t vx0 = INT64_MAX, vy0 = INT64_MAX, vx1 = INT64_MIN, vy1 = INT64_MIN;
  for (int i = 0; i < n; ++i) {
    vx0 = std::min<int64_t>(vx0, xy[2 * i]);
    vx1 = std::max<int64_t>(vx1, xy[2 * i]);
    vy0 = std::min<int64_t>(vy0, xy[2 * i + 1]);
    vy1 = std::max<int64_t>(vy1, xy[2 * i + 1]);
  }
  // Full-resolution window: the vertices' extent (with a pixel of margin) within the image.
  const int fx0 = int(std::clamp<int64_t>(vx0 - 1, 0, width)), fx1 = int(std::clamp<int64_t>(vx1 + 2, 0, width));
  const int fy0 = int(std::clamp<int64_t>(vy0 - 1, 0, height)), fy1 = int(std::clamp<int64_t>(vy1 + 2, 0, height));
  if (fx0 >= fx1 || fy0 >= fy1) return m;
  std::vector<uint8_t> full(size_t(fx1 - fx0) * (fy1 - fy0), 0);
  Canvas cv{height, width, fx0, fy0, fx1 - fx0, fy1 - fy0, full.data(), 1};
  fill_polygon_canvas(cv, xy.data(), n);
  auto px = [&](int x, int y) -> int {
    x -= fx0;
    y -= fy0;
    return (x >= 0 && y >= 0 && x < cv.w && y < cv.h) ? full[size_t(y) * cv.w + x] : 0;
  };
  // Mask pixels whose samples can fall in the window.
  const int mh = height / ratio, mw = width / ratio;
  m.x0 = std::max(fx0 / ratio - 1, 0);
  m.y0 = std::max(fy0 / ratio - 1, 0);
  const int mx1 = std::min(fx1 / ratio + 1, mw), my1 = std::min(fy1 / ratio + 1, mh);
  m.width = std::max(mx1 - m.x0, 0);
  m.height = std::max(my1 - m.y0, 0);
  m.bits.assign(size_t(m.width) * m.height, 0);
  const int lo = ratio / 2 - 1, odd = (ratio - 1) / 2;
  for (int i = 0; i < m.height; ++i) {
    const int y = (m.y0 + i) * ratio;
    for (int j = 0; j < m.width; ++j) {
      const int x = (m.x0 + j) * ratio;
      uint8_t v;
      if (ratio % 2 == 0) {
        const int s = px(x + lo, y + lo) + px(x + lo + 1, y + lo) + px(x + lo, y + lo + 1) + px(x + lo + 1, y + lo + 1);
        v = s >= 2;
      } else {
        v = uint8_t(px(x + odd, y + odd));
      }
      m.bits[size_t(i) * m.width + j] = v;
      m.area += v;
    }
  }
  return m;
}

torch::Tensor polygon_mask(const std::vector<float>& polygon, int height, int width, int ratio) {
  auto m = rasterize_instance(polygon, height, width, ratio);
  auto out = zeros({height / ratio, width / ratio}, torch::kUInt8);
  auto* d = out.data_ptr<uint8_t>();
  for (int i = 0; i < m.height; ++i)
    std::copy_n(m.bits.data() + size_t(i) * m.width, m.width, d + size_t(m.y0 + i) * (width / ratio) + m.x0);
  return out;
}

MaskTargets make_mask_targets(const SampleInstances& instances, int height, int width, int ratio, bool overlap) {
  if (ratio <= 0 || height % ratio || width % ratio)
    throw std::invalid_argument("make_mask_targets: image size must be a multiple of the mask ratio");
  const int mh = height / ratio, mw = width / ratio;
  const size_t n = instances.size();
  std::vector<InstanceMask> ms(n);
  for (size_t i = 0; i < n; ++i) ms[i] = rasterize_instance(instances.polygons[i], height, width, ratio);
  MaskTargets out;
  out.sem = zeros({mh, mw}, torch::kInt32);
  int32_t* sem = out.sem.data_ptr<int32_t>();
  auto paint = [&](const InstanceMask& m, auto&& fn) {
    for (int i = 0; i < m.height; ++i)
      for (int j = 0; j < m.width; ++j)
        if (m.bits[size_t(i) * m.width + j]) fn(size_t(m.y0 + i) * mw + (m.x0 + j));
  };
  if (overlap) {
    // The reference sorts by the negated unsigned area: empty masks (negation 0) first, then area
    // descending.
    out.order.resize(n);
    std::iota(out.order.begin(), out.order.end(), 0);
    std::stable_sort(out.order.begin(), out.order.end(), [&](int64_t a, int64_t b) {
      const int64_t aa = ms[a].area, ab = ms[b].area;
      if ((aa == 0) != (ab == 0)) return aa == 0;
      return aa > ab;
    });
    const bool wide = n > 255;
    out.masks = zeros({mh, mw}, wide ? torch::kInt32 : torch::kUInt8);
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = out.order[k];
      const int32_t value = int32_t(k + 1), cls = instances.cls[i];
      if (wide) {
        int32_t* map = out.masks.data_ptr<int32_t>();
        paint(ms[i], [&](size_t p) { map[p] = value, sem[p] = cls; });
      } else {
        uint8_t* map = out.masks.data_ptr<uint8_t>();
        paint(ms[i], [&](size_t p) { map[p] = uint8_t(value), sem[p] = cls; });
      }
    }
  } else {
    out.order.resize(n);
    std::iota(out.order.begin(), out.order.end(), 0);
    out.masks = zeros({int64_t(n), mh, mw}, torch::kUInt8);
    uint8_t* d = out.masks.data_ptr<uint8_t>();
    for (size_t i = 0; i < n; ++i) paint(ms[i], [&](size_t p) { d[i * size_t(mh) * mw + p] = 1; });
    // Semantic map: the class of the smallest covering instance (ties: the first), so paint from
    // the largest area down, later instances first among equal areas.
    std::vector<int64_t> by_area(n);
    std::iota(by_area.begin(), by_area.end(), 0);
    std::stable_sort(by_area.begin(), by_area.end(),
                     [&](int64_t a, int64_t b) { return ms[a].area != ms[b].area ? ms[a].area > ms[b].area : a > b; });
    for (int64_t i : by_area) {
      const int32_t cls = instances.cls[i];
      paint(ms[i], [&](size_t p) { sem[p] = cls; });
    }
  }
  return out;
}

}  // namespace lucid::data
