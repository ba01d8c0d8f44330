#include "lucid/data/polygon.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lucid::data {

namespace {

// numpy.linspace(0, stop, num): i * (stop / (num - 1)), the last value exactly stop.
std::vector<double> linspace(double stop, int num) {
  std::vector<double> out(std::max(num, 0));
  if (num == 1) {
    out[0] = 0.0;
  } else if (num > 1) {
    const double step = stop / double(num - 1);
    for (int i = 0; i < num; ++i) out[i] = double(i) * step;
    out[num - 1] = stop;
  }
  return out;
}

}  // namespace

std::vector<float> resample_polygon(const std::vector<float>& polygon, int n) {
  const int L = int(polygon.size() / 2);
  if (L == 0 || L == n) return polygon;
  const int m = L + 1;  // closed
  auto fp = [&](int k, int c) { return double(polygon[size_t(k % L) * 2 + c]); };
  std::vector<double> x;
  if (m < n) {
    // Evenly spaced positions merged with the integer positions (an integer first on ties).
    auto lin = linspace(double(m - 1), n - m);
    x.reserve(n);
    size_t j = 0;
    for (int k = 0; k < m; ++k) {
      while (j < lin.size() && lin[j] < double(k)) x.push_back(lin[j++]);
      x.push_back(double(k));
    }
    while (j < lin.size()) x.push_back(lin[j++]);
  } else {
    x = linspace(double(m - 1), n);
  }
  std::vector<float> out(x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    for (int c = 0; c < 2; ++c) {
      double v;
      if (xi <= 0.0) {
        v = fp(0, c);
      } else if (xi >= double(m - 1)) {
        v = fp(m - 1, c);
      } else {
        const int k = int(std::floor(xi));
        const double slope = fp(k + 1, c) - fp(k, c);
        v = slope * (xi - double(k)) + fp(k, c);
      }
      out[i * 2 + c] = float(v);
    }
  }
  return out;
}

void resample_polygons(SampleInstances& instances, int n) {
  size_t longest = 0;
  for (const auto& p : instances.polygons) longest = std::max(longest, p.size() / 2);
  if (longest == 0) return;
  const int count = int(longest) > n ? int(longest) + 1 : n;
  for (auto& p : instances.polygons)
    if (!p.empty()) p = resample_polygon(p, count);
}

int point_in_polygon(const std::vector<float>& polygon, float px, float py) {
  const size_t n = polygon.size() / 2;
  if (n == 0) return -1;
  int crossings = 0;
  float v0x, v0y, vx = polygon[(n - 1) * 2], vy = polygon[(n - 1) * 2 + 1];
  for (size_t i = 0; i < n; ++i) {
    v0x = vx;
    v0y = vy;
    vx = polygon[i * 2];
    vy = polygon[i * 2 + 1];
    if ((v0y <= py && vy <= py) || (v0y > py && vy > py) || (v0x < px && vx < px)) {
      // The edge cannot cross the rightward ray; the point may still lie on it.
      if (py == vy && (px == vx || (py == v0y && ((v0x <= px && px <= vx) || (vx <= px && px <= v0x))))) return 0;
      continue;
    }
    double side = double(py - v0y) * (vx - v0x) - double(px - v0x) * (vy - v0y);
    if (side == 0) return 0;
    if (vy < v0y) side = -side;
    crossings += side > 0;
  }
  return crossings % 2 == 0 ? -1 : 1;
}

Box polygon_box(const std::vector<float>& polygon, float width, float height) {
  const size_t n = polygon.size() / 2;
  if (n == 0) return {0, 0, 0, 0};
  float xmin = std::numeric_limits<float>::infinity(), ymin = xmin, xmax = -xmin, ymax = -xmin;
  for (size_t i = 0; i < n; ++i) {
    xmin = std::min(xmin, polygon[2 * i]);
    xmax = std::max(xmax, polygon[2 * i]);
    ymin = std::min(ymin, polygon[2 * i + 1]);
    ymax = std::max(ymax, polygon[2 * i + 1]);
  }
  if (xmin >= 0 && ymin >= 0 && xmax <= width && ymax <= height) return {xmin, ymin, xmax, ymax};

  float bx0 = std::numeric_limits<float>::infinity(), by0 = bx0, bx1 = -bx0, by1 = -bx0;
  bool any = false;
  auto add = [&](float x, float y) {
    bx0 = std::min(bx0, x);
    by0 = std::min(by0, y);
    bx1 = std::max(bx1, x);
    by1 = std::max(by1, y);
    any = true;
  };
  for (size_t i = 0; i < n; ++i) {
    const float x = polygon[2 * i], y = polygon[2 * i + 1];
    if (x >= 0 && y >= 0 && x <= width && y <= height) add(x, y);
  }
  // Crossings of each edge (the closing one included) with the lines x = 0, x = width, y = 0,
  // y = height, in single precision as the reference computes them.
  const float bounds[4] = {0.f, width, 0.f, height};
  const int axes[4] = {0, 0, 1, 1};
  const float limits[4] = {height, height, width, width};
  for (size_t i = 0; i < n; ++i) {
    const size_t j = (i + 1) % n;
    const float sx = polygon[2 * i], sy = polygon[2 * i + 1];
    const float dx = polygon[2 * j] - sx, dy = polygon[2 * j + 1] - sy;
    for (int b = 0; b < 4; ++b) {
      const float start = axes[b] == 0 ? sx : sy, delta = axes[b] == 0 ? dx : dy;
      const float t = (bounds[b] - start) / delta;  // inf or nan when parallel: rejected below
      const float ix = sx + t * dx, iy = sy + t * dy;
      const float other = axes[b] == 0 ? iy : ix;
      if (t >= 0 && t <= 1 && other >= 0 && other <= limits[b]) add(ix, iy);
    }
  }
  const float corners[4][2] = {{0.f, 0.f}, {width, 0.f}, {0.f, height}, {width, height}};
  for (const auto& c : corners)
    if (point_in_polygon(polygon, c[0], c[1]) >= 0) add(c[0], c[1]);
  if (!any) return {0, 0, 0, 0};
  return {bx0, by0, bx1, by1};
}

}  // namespace lucid::data
