#include "lucid/metrics/rle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "lucid/util/error.h"

namespace lucid::metrics {

namespace {

// Guards polygon rasterisation against absurd coordinates (which would ask for billions of
// boundary points); real annotations lie within a few image sizes of the image.
constexpr double kMaxPolygonCoordinate = 1e7;

}  // namespace

namespace {

// Builds run counts from pixels fed in COCO order (column-major), starting with a run of zeros.
class RunBuilder {
 public:
  RunBuilder(uint32_t h, uint32_t w) : r_{h, w, {}} {}
  void push(bool on) { push_run(on, 1); }
  void push_run(bool on, uint32_t n) {
    if (n == 0) return;
    const uint8_t v = on ? 1 : 0;
    if (v != p_) {
      r_.counts.push_back(c_);
      c_ = 0;
      p_ = v;
    }
    c_ += n;
  }
  Rle finish() {
    r_.counts.push_back(c_);
    return std::move(r_);
  }

 private:
  Rle r_;
  uint8_t p_ = 0;
  uint32_t c_ = 0;
};

}  // namespace

Rle rle_encode_column_major(const uint8_t* mask, uint32_t h, uint32_t w) {
  RunBuilder runs(h, w);
  const size_t n = static_cast<size_t>(h) * w;
  for (size_t j = 0; j < n; ++j) runs.push(mask[j] != 0);
  return runs.finish();
}

Rle rle_encode(const uint8_t* mask, uint32_t h, uint32_t w) {
  RunBuilder runs(h, w);
  for (uint32_t x = 0; x < w; ++x)
    for (uint32_t y = 0; y < h; ++y) runs.push(mask[static_cast<size_t>(y) * w + x] != 0);
  return runs.finish();
}

Rle rle_encode_window(const uint8_t* window, uint32_t wh, uint32_t ww, uint32_t x0, uint32_t y0, uint32_t h,
                      uint32_t w) {
  if (uint64_t(x0) + ww > w || uint64_t(y0) + wh > h) throw UserError("rle_encode_window: window outside the image");
  RunBuilder runs(h, w);
  runs.push_run(false, x0 * h);
  for (uint32_t x = 0; x < ww; ++x) {
    runs.push_run(false, y0);
    for (uint32_t y = 0; y < wh; ++y) runs.push(window[static_cast<size_t>(y) * ww + x] != 0);
    runs.push_run(false, h - y0 - wh);
  }
  runs.push_run(false, (w - x0 - ww) * h);
  return runs.finish();
}

std::vector<uint8_t> rle_decode_column_major(const Rle& rle) {
  std::vector<uint8_t> out(static_cast<size_t>(rle.h) * rle.w, 0);
  size_t pos = 0;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const size_t end = std::min(out.size(), pos + rle.counts[i]);
    if (i % 2 == 1)
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(pos), out.begin() + static_cast<std::ptrdiff_t>(end), 1);
    pos = end;
  }
  return out;
}

std::vector<uint8_t> rle_decode(const Rle& rle) {
  std::vector<uint8_t> out(static_cast<size_t>(rle.h) * rle.w, 0);
  if (rle.h == 0) return out;
  size_t pos = 0;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const size_t end = std::min(out.size(), pos + rle.counts[i]);
    if (i % 2 == 1) {
      for (size_t j = pos; j < end; ++j) out[(j % rle.h) * rle.w + j / rle.h] = 1;
    }
    pos = end;
  }
  return out;
}

void rle_validate(const Rle& rle) {
  uint64_t sum = 0;
  for (uint32_t c : rle.counts) sum += c;
  const uint64_t n = static_cast<uint64_t>(rle.h) * rle.w;
  if (sum != n) {
    throw UserError("invalid RLE: counts sum to " + std::to_string(sum) + " but size " + std::to_string(rle.h) + "x" +
                    std::to_string(rle.w) + " has " + std::to_string(n) + " pixels");
  }
}

uint64_t rle_area(const Rle& rle) {
  uint64_t a = 0;
  for (size_t i = 1; i < rle.counts.size(); i += 2) a += rle.counts[i];
  return a;
}

BoxXywh rle_bbox(const Rle& rle) {
  // Same unsigned 32-bit arithmetic as the COCO API: a trailing run of zeros is not looked at, and
  // a run of ones that continues into a later column spans the full height.
  const uint32_t h = rle.h, w = rle.w;
  const size_t m = rle.counts.size() / 2 * 2;
  if (m == 0 || h == 0) return {0, 0, 0, 0};
  uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
  for (size_t j = 0; j < m; ++j) {
    cc += rle.counts[j];
    const uint32_t t = cc - static_cast<uint32_t>(j % 2);
    const uint32_t y = t % h, x = (t - y) / h;
    if (j % 2 == 0) {
      xp = x;
    } else if (xp < x) {
      ys = 0;
      ye = h - 1;
    }
    xs = std::min(xs, x);
    xe = std::max(xe, x);
    ys = std::min(ys, y);
    ye = std::max(ye, y);
  }
  return {static_cast<double>(xs), static_cast<double>(ys), static_cast<double>(xe - xs + 1),
          static_cast<double>(ye - ys + 1)};
}

Rle rle_from_polygon(const double* xy, size_t n_coords, uint32_t h, uint32_t w) {
  const size_t k = n_coords / 2;
  for (size_t j = 0; j < 2 * k; ++j) {
    if (!(std::abs(xy[j]) <= kMaxPolygonCoordinate)) {
      throw UserError("polygon coordinate " + std::to_string(xy[j]) + " is not finite or far outside the image");
    }
  }
  // Scratch buffers reused across calls on the same thread (rasterising runs per annotation).
  thread_local std::vector<int> x, y;
  thread_local std::vector<uint32_t> a;
  // 1. Vertices on a grid 5x finer than pixels.
  const double scale = 5;
  x.assign(k + 1, 0);
  y.assign(k + 1, 0);
  for (size_t j = 0; j < k; ++j) x[j] = static_cast<int>(scale * xy[2 * j] + .5);
  for (size_t j = 0; j < k; ++j) y[j] = static_cast<int>(scale * xy[2 * j + 1] + .5);
  x[k] = x[0];
  y[k] = y[0];
  // 2. Walk every grid point along the boundary (u, v); where two consecutive points cross a
  //    pixel-centre column, record the first pixel row below the boundary there as a toggle
  //    position in column-major order. The COCO API stores all points first and then scans the
  //    pairs; this visits the same pairs in the same order. Column c's centre lies on grid
  //    coordinate 5c + 2, so ((u' + .5) / 5 - .5) is an integer exactly when u' = 5c + 2.
  a.clear();
  const double w_last = static_cast<double>(static_cast<size_t>(w) - 1);
  bool have_prev = false;
  int pu = 0, pv = 0;
  auto visit = [&](int cu, int cv) {
    if (have_prev && cu != pu) {
      const int uc = cu < pu ? cu : cu - 1;
      if (uc >= 2 && (uc - 2) % 5 == 0 && !(static_cast<double>((uc - 2) / 5) > w_last)) {
        double yd = static_cast<double>(cv < pv ? cv : pv);
        yd = (yd + .5) / scale - .5;
        if (yd < 0) {
          yd = 0;
        } else if (yd > h) {
          yd = h;
        }
        yd = std::ceil(yd);
        a.push_back(static_cast<uint32_t>((uc - 2) / 5 * static_cast<int>(h) + static_cast<int>(yd)));
      }
    }
    pu = cu;
    pv = cv;
    have_prev = true;
  };
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    // A zero-length edge yields one point whose row is never consulted; avoid 0/0 for it.
    const double s = dx >= dy ? (dx == 0 ? 0.0 : static_cast<double>(ye - ys) / dx) : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        visit(t + xs, static_cast<int>(ys + s * t + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        visit(static_cast<int>(xs + s * t + .5), t + ys);
      }
    }
  }
  // 3. Toggles to runs: sort, difference, and drop pairs of toggles at the same place.
  a.push_back(static_cast<uint32_t>(static_cast<size_t>(h) * w));
  std::sort(a.begin(), a.end());
  uint32_t p = 0;
  for (auto& t : a) {
    const uint32_t cur = t;
    t -= p;
    p = cur;
  }
  Rle r{h, w, {}};
  r.counts.reserve(a.size());
  size_t j = 0;
  r.counts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.counts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.counts.back() += a[j++];
    }
  }
  return r;
}

Rle rle_from_box(const BoxXywh& box, uint32_t h, uint32_t w) {
  const double xs = box[0], xe = xs + box[2], ys = box[1], ye = ys + box[3];
  const double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
  return rle_from_polygon(xy, 8, h, w);
}

namespace {

// Two run-length encodings walked in step, as pycocotools' merge and IoU loops do: each step
// consumes the shorter current run of the two and reports how many pixels remain ahead.
struct RunPair {
  const std::vector<uint32_t>& A;
  const std::vector<uint32_t>& B;
  uint32_t ca, cb;
  bool va = false, vb = false;
  size_t a = 1, b = 1;

  RunPair(const std::vector<uint32_t>& a_counts, const std::vector<uint32_t>& b_counts)
      : A(a_counts), B(b_counts), ca(A.empty() ? 0 : A[0]), cb(B.empty() ? 0 : B[0]) {}
  uint32_t run() const { return std::min(ca, cb); }
  uint64_t advance(uint32_t c) {
    ca -= c;
    if (!ca && a < A.size()) {
      ca = A[a++];
      va = !va;
    }
    cb -= c;
    if (!cb && b < B.size()) {
      cb = B[b++];
      vb = !vb;
    }
    return static_cast<uint64_t>(ca) + cb;
  }
};

}  // namespace

Rle rle_merge(const std::vector<Rle>& rles, bool intersect) {
  if (rles.empty()) return Rle{};
  if (rles.size() == 1) return rles[0];
  uint32_t h = rles[0].h, w = rles[0].w;
  std::vector<uint32_t> cnts = rles[0].counts;
  std::vector<uint32_t> next;
  for (size_t i = 1; i < rles.size(); ++i) {
    const Rle& b_rle = rles[i];
    if (b_rle.h != h || b_rle.w != w) return Rle{};
    next.clear();
    RunPair runs(cnts, b_rle.counts);
    bool v = false;
    uint32_t cc = 0;
    uint64_t ct = 1;
    while (ct > 0) {
      const uint32_t c = runs.run();
      cc += c;
      ct = runs.advance(c);
      const bool vp = v;
      v = intersect ? (runs.va && runs.vb) : (runs.va || runs.vb);
      if (v != vp || ct == 0) {
        next.push_back(cc);
        cc = 0;
      }
    }
    cnts.swap(next);
  }
  return Rle{h, w, std::move(cnts)};
}

Rle rle_from_polygons(const std::vector<std::vector<double>>& polygons, uint32_t h, uint32_t w) {
  std::vector<Rle> parts;
  parts.reserve(polygons.size());
  for (const auto& p : polygons) parts.push_back(rle_from_polygon(p, h, w));
  return rle_merge(parts, false);
}

std::string rle_counts_to_string(const std::vector<uint32_t>& counts) {
  std::string s;
  s.reserve(counts.size() * 2);
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t x = counts[i];
    if (i > 2) x -= static_cast<int64_t>(counts[i - 2]);
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;  // arithmetic shift: negative differences keep their sign bits
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      s.push_back(static_cast<char>(c + 48));
    }
  }
  return s;
}

std::string rle_to_string(const Rle& rle) { return rle_counts_to_string(rle.counts); }

std::vector<uint32_t> rle_counts_from_string(std::string_view s) {
  std::vector<uint32_t> counts;
  counts.reserve(s.size());
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size()) throw UserError("invalid RLE string: truncated final count");
      const int c = static_cast<unsigned char>(s[p]) - 48;
      if (c < 0 || c > 63) {
        throw UserError("invalid RLE string: invalid character '" + std::string(1, s[p]) + "' at offset " +
                        std::to_string(p));
      }
      if (k >= 12) throw UserError("invalid RLE string: count too long at offset " + std::to_string(p));
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= static_cast<int64_t>(-1) * (int64_t{1} << (5 * k));
    }
    const size_t m = counts.size();
    if (m > 2) x += static_cast<int64_t>(counts[m - 2]);
    if (x < 0 || x > static_cast<int64_t>(UINT32_MAX)) {
      throw UserError("invalid RLE string: count " + std::to_string(x) + " out of range (count " + std::to_string(m) +
                      ")");
    }
    counts.push_back(static_cast<uint32_t>(x));
  }
  return counts;
}

Rle rle_from_string(std::string_view s, uint32_t h, uint32_t w) {
  Rle r{h, w, rle_counts_from_string(s)};
  uint64_t sum = 0;
  for (auto c : r.counts) sum += c;
  const uint64_t n = static_cast<uint64_t>(h) * w;
  if (sum != n) {
    throw UserError("invalid RLE: counts sum to " + std::to_string(sum) + " but size " + std::to_string(h) + "x" +
                    std::to_string(w) + " has " + std::to_string(n) + " pixels");
  }
  return r;
}

double box_iou(const BoxXywh& D, const BoxXywh& G, bool crowd) {
  const double ga = G[2] * G[3], da = D[2] * D[3];
  const double w = std::fmin(D[2] + D[0], G[2] + G[0]) - std::fmax(D[0], G[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(D[3] + D[1], G[3] + G[1]) - std::fmax(D[1], G[1]);
  if (h <= 0) return 0;
  const double i = w * h;
  const double u = crowd ? da : da + ga - i;
  return i / u;
}

namespace {

// IoU of two masks of equal size whose boxes overlap: walk both run lists together.
double mask_iou_runs(const Rle& dt, const Rle& gt, bool crowd) {
  RunPair runs(dt.counts, gt.counts);
  uint64_t inter = 0, uni = 0, ct = 1;
  while (ct > 0) {
    const uint32_t c = runs.run();
    if (runs.va || runs.vb) {
      uni += c;
      if (runs.va && runs.vb) inter += c;
    }
    ct = runs.advance(c);
  }
  if (inter == 0) {
    uni = 1;
  } else if (crowd) {
    uni = rle_area(dt);
  }
  return static_cast<double>(inter) / static_cast<double>(uni);
}

}  // namespace

double rle_iou(const Rle& dt, const Rle& gt, bool crowd) {
  if (!(box_iou(rle_bbox(dt), rle_bbox(gt), crowd) > 0)) return 0;
  if (dt.h != gt.h || dt.w != gt.w) return -1;
  return mask_iou_runs(dt, gt, crowd);
}

std::vector<double> rle_iou_matrix(const std::vector<const Rle*>& dts, const std::vector<const Rle*>& gts,
                                   const std::vector<uint8_t>& crowd) {
  const size_t D = dts.size(), G = gts.size();
  std::vector<double> out(D * G, 0.0);
  if (D == 0 || G == 0) return out;
  std::vector<BoxXywh> db(D), gb(G);
  for (size_t d = 0; d < D; ++d) db[d] = rle_bbox(*dts[d]);
  for (size_t g = 0; g < G; ++g) gb[g] = rle_bbox(*gts[g]);
  for (size_t d = 0; d < D; ++d) {
    for (size_t g = 0; g < G; ++g) {
      const bool c = !crowd.empty() && crowd[g];
      if (!(box_iou(db[d], gb[g], c) > 0)) continue;
      if (dts[d]->h != gts[g]->h || dts[d]->w != gts[g]->w) {
        out[d * G + g] = -1;
        continue;
      }
      out[d * G + g] = mask_iou_runs(*dts[d], *gts[g], c);
    }
  }
  return out;
}

std::vector<double> box_iou_matrix(const std::vector<BoxXywh>& dts, const std::vector<BoxXywh>& gts,
                                   const std::vector<uint8_t>& crowd) {
  const size_t D = dts.size(), G = gts.size();
  std::vector<double> out(D * G, 0.0);
  for (size_t d = 0; d < D; ++d) {
    for (size_t g = 0; g < G; ++g) out[d * G + g] = box_iou(dts[d], gts[g], !crowd.empty() && crowd[g]);
  }
  return out;
}

}  // namespace lucid::metrics
