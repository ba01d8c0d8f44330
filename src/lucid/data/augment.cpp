#include "lucid/data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "lucid/data/polygon.h"

namespace lucid::data {

namespace {

void check_sample(const Sample& s, const char* what) {
  if (!s.image.defined() || s.image.dim() != 3 || s.image.scalar_type() != torch::kUInt8 || !s.image.is_cpu())
    throw std::invalid_argument(std::string(what) + ": sample image must be a uint8 (H, W, C) CPU tensor");
  const size_t n = s.instances.cls.size();
  if (s.instances.polygons.size() != n || s.instances.boxes.size() != n)
    throw std::invalid_argument(std::string(what) + ": instance arrays disagree in length");
}

Matrix3 mul(const Matrix3& a, const Matrix3& b) {
  Matrix3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) c[i * 3 + j] = a[i * 3] * b[j] + a[i * 3 + 1] * b[3 + j] + a[i * 3 + 2] * b[6 + j];
  return c;
}

constexpr Matrix3 kIdentity = {1, 0, 0, 0, 1, 0, 0, 0, 1};

}  // namespace

// ---- Mosaic ----------------------------------------------------------------------------------------

MosaicDraw draw_mosaic(SampleRng& rng, double p, int imgsz, int64_t dataset_size) {
  MosaicDraw d;
  const double u = rng.uniform();
  d.apply = p >= 1.0 || (p > 0.0 && u < p);
  // U(-border, 2s + border) with border = floor(-s / 2).
  const double lo = (imgsz + 1) / 2, hi = 2.0 * imgsz - (imgsz + 1) / 2;
  d.yc = int(rng.uniform(lo, hi));
  d.xc = int(rng.uniform(lo, hi));
  for (auto& o : d.others) o = dataset_size > 0 ? rng.below(dataset_size) : 0;
  return d;
}

namespace {

// Tile i of the reference's 4-mosaic on the s2 x s2 canvas for an h x w image: tile 0 ends at the
// centre (its bottom-right corner there), tile 1 to its right, tile 2 below, tile 3 diagonally,
// cropped at the canvas border.
PixelTile mosaic_tile(int i, int h, int w, int xc, int yc, int s2) {
  int x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b;
  if (i == 0) {
    x1a = std::max(xc - w, 0), y1a = std::max(yc - h, 0), x2a = xc, y2a = yc;
    x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
  } else if (i == 1) {
    x1a = xc, y1a = std::max(yc - h, 0), x2a = std::min(xc + w, s2), y2a = yc;
    x1b = 0, y1b = h - (y2a - y1a), x2b = std::min(w, x2a - x1a), y2b = h;
  } else if (i == 2) {
    x1a = std::max(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(s2, yc + h);
    x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = std::min(y2a - y1a, h);
  } else {
    x1a = xc, y1a = yc, x2a = std::min(xc + w, s2), y2a = std::min(s2, yc + h);
    x1b = 0, y1b = 0, x2b = std::min(w, x2a - x1a), y2b = std::min(y2a - y1a, h);
  }
  // The image part is drawn only when it matches the canvas part (the reference's slice
  // assignment); the labels shift by (x0 - src_x, y0 - src_y) either way.
  const int rows = y2a - y1a, cols = x2a - x1a;
  const bool drawn = rows > 0 && cols > 0 && rows == y2b - y1b && cols == x2b - x1b;
  return {-1, x1a, y1a, drawn ? x2a : x1a, drawn ? y2a : y1a, x1b, y1b};
}

std::array<PixelTile, 4> mosaic_tiles(const std::array<Sample, 4>& tiles, int xc, int yc, int s2) {
  std::array<PixelTile, 4> out;
  for (int i = 0; i < 4; ++i) {
    check_sample(tiles[i], "mosaic4");
    out[i] = mosaic_tile(i, tiles[i].height(), tiles[i].width(), xc, yc, s2);
    out[i].index = tiles[i].index;
  }
  return out;
}

// The canvas pixels; with `window` = {x0, y0, x1, y1} only those in [x0, x1) x [y0, y1).
torch::Tensor mosaic_canvas(const std::array<PixelTile, 4>& placed, const std::array<torch::Tensor, 4>& images, int s2,
                            uint8_t pad_value, std::optional<std::array<int, 4>> window) {
  const int cn = int(images[0].size(2));
  auto out = torch::empty({s2, s2, cn}, torch::kUInt8);
  uint8_t* canvas = out.data_ptr<uint8_t>();
  const auto [wx0, wy0, wx1, wy1] = window.value_or(std::array<int, 4>{0, 0, s2, s2});
  if (wx0 < 0 || wy0 < 0 || wx1 > s2 || wy1 > s2) throw std::invalid_argument("mosaic4: window outside the canvas");
  for (int y = wy0; y < wy1; ++y)
    if (wx1 > wx0) std::memset(canvas + (size_t(y) * s2 + wx0) * cn, pad_value, size_t(wx1 - wx0) * cn);
  for (int i = 0; i < 4; ++i) {
    auto img = images[i].contiguous();
    if (img.size(2) != cn) throw std::invalid_argument("mosaic4: tiles differ in channels");
    const int w = int(img.size(1));
    const auto& t = placed[i];
    const uint8_t* src = img.data_ptr<uint8_t>();
    // The tile's part inside the window.
    const int cx0 = std::max(t.x0, wx0), cx1 = std::min(t.x1, wx1), cy0 = std::max(t.y0, wy0),
              cy1 = std::min(t.y1, wy1);
    for (int y = cy0; y < cy1 && cx0 < cx1; ++y)
      std::memcpy(canvas + (size_t(y) * s2 + cx0) * cn,
                  src + (size_t(y - t.y0 + t.src_y) * w + (cx0 - t.x0 + t.src_x)) * cn, size_t(cx1 - cx0) * cn);
  }
  return out;
}

// The tiles' instances shifted with their tile, then clipped to the canvas, zero-area boxes dropped.
SampleInstances mosaic_instances(const std::array<PixelTile, 4>& placed, std::array<Sample, 4>& tiles, int s2) {
  SampleInstances out;
  for (int i = 0; i < 4; ++i) {
    const float padw = float(placed[i].x0 - placed[i].src_x), padh = float(placed[i].y0 - placed[i].src_y);
    auto& in = tiles[i].instances;
    for (auto& b : in.boxes) b = {b[0] + padw, b[1] + padh, b[2] + padw, b[3] + padh};
    for (auto& p : in.polygons)
      for (size_t k = 0; k + 1 < p.size(); k += 2) p[k] += padw, p[k + 1] += padh;
    out.append(std::move(in));
  }
  const float lim = float(s2);
  std::vector<bool> keep(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    auto& b = out.boxes[i];
    for (auto& v : b) v = std::clamp(v, 0.f, lim);
    for (auto& v : out.polygons[i]) v = std::clamp(v, 0.f, lim);
    keep[i] = (b[2] - b[0]) * (b[3] - b[1]) > 0.f;
  }
  out.keep(keep);
  return out;
}

}  // namespace

Sample mosaic4(std::array<Sample, 4>&& tiles, int xc, int yc, int imgsz, uint8_t pad_value,
               std::optional<std::array<int, 4>> window) {
  const int s2 = 2 * imgsz;
  const auto placed = mosaic_tiles(tiles, xc, yc, s2);
  Sample out;
  out.index = tiles[0].index;
  out.orig_height = tiles[0].orig_height;
  out.orig_width = tiles[0].orig_width;
  out.image =
      mosaic_canvas(placed, {tiles[0].image, tiles[1].image, tiles[2].image, tiles[3].image}, s2, pad_value, window);
  out.instances = mosaic_instances(placed, tiles, s2);
  return out;
}

// ---- Random perspective --------------------------------------------------------------------------

AffineDraw draw_affine(SampleRng& rng, const AugmentOptions& o) {
  AffineDraw d;
  d.perspective_x = rng.uniform(-o.perspective, o.perspective);
  d.perspective_y = rng.uniform(-o.perspective, o.perspective);
  d.degrees = rng.uniform(-o.degrees, o.degrees);
  d.scale = rng.uniform(1 - o.scale, 1 + o.scale);
  d.shear_x = rng.uniform(-o.shear, o.shear);
  d.shear_y = rng.uniform(-o.shear, o.shear);
  d.translate_x = rng.uniform(0.5 - o.translate, 0.5 + o.translate);
  d.translate_y = rng.uniform(0.5 - o.translate, 0.5 + o.translate);
  return d;
}

Matrix3 affine_matrix(const AffineDraw& d, int in_h, int in_w, int out_h, int out_w) {
  const Matrix3 C = {1, 0, -in_w / 2.0, 0, 1, -in_h / 2.0, 0, 0, 1};
  const Matrix3 P = {1, 0, 0, 0, 1, 0, d.perspective_x, d.perspective_y, 1};
  const double a = d.degrees * std::numbers::pi / 180.0;
  const double alpha = d.scale * std::cos(a), beta = d.scale * std::sin(a);
  const Matrix3 R = {alpha, beta, 0, -beta, alpha, 0, 0, 0, 1};
  const Matrix3 S = {
      1, std::tan(d.shear_x * std::numbers::pi / 180.0), 0, std::tan(d.shear_y * std::numbers::pi / 180.0), 1, 0, 0, 0,
      1};
  const Matrix3 T = {1, 0, d.translate_x * out_w, 0, 1, d.translate_y * out_h, 0, 0, 1};
  return mul(T, mul(S, mul(R, mul(P, C))));
}

namespace {

// The warped image; random_perspective keeps the image when the map is the identity at its size.
torch::Tensor perspective_pixels(const torch::Tensor& image, const Matrix3& M, int out_h, int out_w, bool perspective,
                                 uint8_t pad_value) {
  if (out_h == image.size(0) && out_w == image.size(1) && M == kIdentity) return image;
  return perspective ? warp_perspective(image, M, out_h, out_w, pad_value)
                     : warp_affine(image, M, out_h, out_w, pad_value);
}

void perspective_instances(SampleInstances& in, const Matrix3& M, double scale, int out_h, int out_w) {
  const size_t n = in.size();
  bool any_polygon = false;
  for (const auto& p : in.polygons) any_polygon |= !p.empty();
  auto apply = [&](double x, double y, float& ox, float& oy) {
    const double X = M[0] * x + M[1] * y + M[2], Y = M[3] * x + M[4] * y + M[5];
    const double W = M[6] * x + M[7] * y + M[8];
    ox = float(X / W);
    oy = float(Y / W);
  };
  const float W = float(out_w), H = float(out_h);
  std::vector<bool> keep(n);
  for (size_t i = 0; i < n; ++i) {
    const Box old = in.boxes[i];
    Box nb;
    auto& poly = in.polygons[i];
    if (!poly.empty()) {
      for (size_t k = 0; k + 1 < poly.size(); k += 2) apply(poly[k], poly[k + 1], poly[k], poly[k + 1]);
      nb = polygon_box(poly, W, H);
      for (size_t k = 0; k + 1 < poly.size(); k += 2) {
        poly[k] = std::clamp(poly[k], nb[0], nb[2]);
        poly[k + 1] = std::clamp(poly[k + 1], nb[1], nb[3]);
      }
    } else {
      float xs[4], ys[4];
      apply(old[0], old[1], xs[0], ys[0]);
      apply(old[2], old[3], xs[1], ys[1]);
      apply(old[0], old[3], xs[2], ys[2]);
      apply(old[2], old[1], xs[3], ys[3]);
      nb = {*std::min_element(xs, xs + 4), *std::min_element(ys, ys + 4), *std::max_element(xs, xs + 4),
            *std::max_element(ys, ys + 4)};
    }
    nb = {std::clamp(nb[0], 0.f, W), std::clamp(nb[1], 0.f, H), std::clamp(nb[2], 0.f, W), std::clamp(nb[3], 0.f, H)};
    for (size_t k = 0; k + 1 < poly.size(); k += 2) {
      poly[k] = std::clamp(poly[k], 0.f, W);
      poly[k + 1] = std::clamp(poly[k + 1], 0.f, H);
    }
    in.boxes[i] = nb;
    // box_candidates against the old box scaled by the affine scale.
    const double w1 = (double(old[2]) - old[0]) * scale, h1 = (double(old[3]) - old[1]) * scale;
    const double w2 = double(nb[2]) - nb[0], h2 = double(nb[3]) - nb[1];
    const double eps = 1e-16, area_thr = any_polygon ? 0.01 : 0.10;
    const double ar = std::max(w2 / (h2 + eps), h2 / (w2 + eps));
    keep[i] = w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + eps) > area_thr && ar < 100;
  }
  in.keep(keep);
}

}  // namespace

Sample random_perspective(Sample&& s, const Matrix3& M, double scale, int out_h, int out_w, bool perspective,
                          uint8_t pad_value) {
  check_sample(s, "random_perspective");
  s.image = perspective_pixels(s.image, M, out_h, out_w, perspective, pad_value);
  perspective_instances(s.instances, M, scale, out_h, out_w);
  return std::move(s);
}

// ---- Flips ---------------------------------------------------------------------------------------

namespace {
// x -> ext - x (horizontal) or y -> ext - y (vertical).
void flip_instances(SampleInstances& in, float ext, bool horizontal) {
  const int c = horizontal ? 0 : 1;
  for (auto& b : in.boxes) {
    const float lo = ext - b[c + 2], hi = ext - b[c];
    b[c] = lo;
    b[c + 2] = hi;
  }
  for (auto& p : in.polygons)
    for (size_t k = c; k < p.size(); k += 2) p[k] = ext - p[k];
}
}  // namespace

void flip_sample(Sample& s, bool horizontal) {
  check_sample(s, "flip_sample");
  s.image = flip_image(s.image, horizontal);
  flip_instances(s.instances, float(horizontal ? s.width() : s.height()), horizontal);
}

// ---- Letterbox -------------------------------------------------------------------------------------

Sample letterbox(Sample&& s, int new_h, int new_w, bool scaleup, uint8_t pad_value, Letterbox* info) {
  check_sample(s, "letterbox");
  const int h = s.height(), w = s.width(), cn = int(s.image.size(2));
  double r = std::min(double(new_h) / h, double(new_w) / w);
  if (!scaleup) r = std::min(r, 1.0);
  const int uw = int(std::nearbyint(w * r)), uh = int(std::nearbyint(h * r));
  const double dw = (new_w - uw) / 2.0, dh = (new_h - uh) / 2.0;
  const int top = int(std::nearbyint(dh - 0.1)), bottom = int(std::nearbyint(dh + 0.1));
  const int left = int(std::nearbyint(dw - 0.1)), right = int(std::nearbyint(dw + 0.1));
  auto img = (uh != h || uw != w) ? resize_linear(s.image, uh, uw) : s.image.contiguous();
  const int oh = uh + top + bottom, ow = uw + left + right;
  auto out = torch::empty({oh, ow, cn}, torch::kUInt8);
  const uint8_t* src = img.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  std::memset(dst, pad_value, size_t(oh) * ow * cn);
  for (int y = 0; y < uh; ++y)
    std::memcpy(dst + (size_t(y + top) * ow + left) * cn, src + size_t(y) * uw * cn, size_t(uw) * cn);
  s.image = out;
  const float rf = float(r), lf = float(left), tf = float(top);
  for (auto& b : s.instances.boxes) b = {b[0] * rf + lf, b[1] * rf + tf, b[2] * rf + lf, b[3] * rf + tf};
  for (auto& p : s.instances.polygons)
    for (size_t k = 0; k + 1 < p.size(); k += 2) p[k] = p[k] * rf + lf, p[k + 1] = p[k + 1] * rf + tf;
  if (info) *info = {r, left, top, uh, uw};
  return std::move(s);
}

RectPlan rect_batches(const std::vector<std::pair<int, int>>& sizes_hw, int batch, int imgsz, int stride, double pad) {
  if (batch <= 0) throw std::invalid_argument("rect_batches: batch must be positive");
  const size_t n = sizes_hw.size();
  std::vector<double> ar(n);
  for (size_t i = 0; i < n; ++i) ar[i] = double(sizes_hw[i].first) / double(sizes_hw[i].second);
  RectPlan plan;
  plan.order.resize(n);
  std::iota(plan.order.begin(), plan.order.end(), 0);
  std::stable_sort(plan.order.begin(), plan.order.end(), [&](int64_t a, int64_t b) { return ar[a] < ar[b]; });
  for (size_t start = 0; start < n; start += batch) {
    const size_t end = std::min(n, start + size_t(batch));
    double mini = ar[plan.order[start]], maxi = mini;
    for (size_t k = start; k < end; ++k)
      mini = std::min(mini, ar[plan.order[k]]), maxi = std::max(maxi, ar[plan.order[k]]);
    double sh = 1, sw = 1;
    if (maxi < 1)
      sh = maxi;
    else if (mini > 1)
      sw = 1 / mini;
    const int bh = int(std::ceil(sh * imgsz / stride + pad)) * stride;
    const int bw = int(std::ceil(sw * imgsz / stride + pad)) * stride;
    plan.shapes.emplace_back(bh, bw);
  }
  return plan;
}

// ---- HSV gains -------------------------------------------------------------------------------------

std::array<float, 3> draw_hsv_gains(SampleRng& rng, const AugmentOptions& o) {
  std::array<float, 3> g;
  const double gains[3] = {o.hsv_h, o.hsv_s, o.hsv_v};
  for (int k = 0; k < 3; ++k) g[k] = float(rng.uniform(-1.0, 1.0) * gains[k]);
  return g;
}

// ---- Pipelines -------------------------------------------------------------------------------------

namespace {
Sample load(const SampleSource& source, int64_t index, const AugmentOptions& o) {
  Sample s = source(index);
  check_sample(s, "sample source");
  s.index = index;
  resample_polygons(s.instances, o.polygon_points);
  return s;
}
}  // namespace

bool mixes(const AugmentOptions& o) { return o.mixup > 0 || o.cutmix > 0 || o.copy_paste > 0; }

Sample plan_sample(const SampleSource& source, int64_t dataset_size, int64_t index, const AugmentOptions& o,
                   uint64_t seed, int64_t epoch, PixelPlan& plan, std::array<float, 3>* hsv_gains,
                   std::array<torch::Tensor, 4>* tile_images) {
  if (mixes(o)) throw std::invalid_argument("plan_sample: mixup, cutmix and copy_paste have no pixel plan");
  SampleRng mosaic_rng(seed, epoch, index, Purpose::Mosaic);
  const auto md = draw_mosaic(mosaic_rng, o.mosaic, o.imgsz, dataset_size);
  SampleRng affine_rng(seed, epoch, index, Purpose::Perspective);
  const auto ad = draw_affine(affine_rng, o);
  plan = PixelPlan{};
  const int out_h = o.out_h > 0 ? o.out_h : o.imgsz, out_w = o.out_w > 0 ? o.out_w : o.imgsz;
  plan.out_h = out_h;
  plan.out_w = out_w;
  plan.pad_value = o.pad_value;
  plan.perspective = o.perspective != 0.0;
  Sample s = load(source, index, o);
  std::array<torch::Tensor, 4> images{s.image};
  if (md.apply) {
    std::array<Sample, 4> tiles{std::move(s), load(source, md.others[0], o), load(source, md.others[1], o),
                                load(source, md.others[2], o)};
    const int s2 = 2 * o.imgsz;
    plan.tiles = mosaic_tiles(tiles, md.xc, md.yc, s2);
    plan.tile_count = 4;
    plan.canvas_h = plan.canvas_w = s2;
    plan.xc = md.xc, plan.yc = md.yc;
    for (int i = 0; i < 4; ++i) images[i] = tiles[i].image;
    s = Sample{};
    s.index = tiles[0].index;
    s.orig_height = tiles[0].orig_height;
    s.orig_width = tiles[0].orig_width;
    s.instances = mosaic_instances(plan.tiles, tiles, s2);
  } else {
    plan.canvas_h = plan.yc = s.height();
    plan.canvas_w = plan.xc = s.width();
    plan.tiles[0] = {index, 0, 0, s.width(), s.height(), 0, 0};
    s.image = torch::Tensor();
  }
  plan.M = affine_matrix(ad, plan.canvas_h, plan.canvas_w, out_h, out_w);
  perspective_instances(s.instances, plan.M, ad.scale, out_h, out_w);
  SampleRng flip_rng(seed, epoch, index, Purpose::Flip);
  plan.flip_ud = flip_rng.uniform() < o.flipud;
  plan.flip_lr = flip_rng.uniform() < o.fliplr;
  if (plan.flip_ud) flip_instances(s.instances, float(out_h), /*horizontal=*/false);
  if (plan.flip_lr) flip_instances(s.instances, float(out_w), /*horizontal=*/true);
  if (hsv_gains) {
    SampleRng hsv_rng(seed, epoch, index, Purpose::Hsv);
    *hsv_gains = draw_hsv_gains(hsv_rng, o);
  }
  if (tile_images) *tile_images = std::move(images);
  return s;
}

torch::Tensor render_pixels(const PixelPlan& p, const std::array<torch::Tensor, 4>& tile_images) {
  torch::Tensor canvas = tile_images[0];
  if (p.tile_count == 4) {
    // Only the part of the canvas that the warp reads is assembled.
    std::optional<std::array<int, 4>> window;
    if (!p.perspective) window = warp_affine_source_window(p.M, p.canvas_h, p.canvas_w, p.out_h, p.out_w);
    canvas = mosaic_canvas(p.tiles, tile_images, p.canvas_w, p.pad_value, window);
  }
  auto image = perspective_pixels(canvas, p.M, p.out_h, p.out_w, p.perspective, p.pad_value);
  if (p.flip_ud) image = flip_image(image, /*horizontal=*/false);
  if (p.flip_lr) image = flip_image(image, /*horizontal=*/true);
  return image;
}

namespace {

// Roles of the images a sample is made of (role_purpose): the sample itself 0, its copy_paste
// partner 1, its mixup partner 2 and that one's copy_paste partner 3, its cutmix partner 4 and that
// one's copy_paste partner 5. Odd roles are copy_paste partners, whose pre_transform is mosaic and
// perspective only (the reference's nested Compose([Mosaic, affine])).
constexpr uint32_t kMixUpPartner = 2, kCutMixPartner = 4;

// The reference's pre_transform of image `image_index` with the streams of (owner, role): mosaic,
// copy_paste in flip mode, perspective to imgsz, copy_paste in mixup mode.
Sample pre_transform(const SampleSource& source, int64_t dataset_size, int64_t owner, int64_t image_index,
                     const AugmentOptions& o, uint64_t seed, int64_t epoch, uint32_t role) {
  SampleRng mosaic_rng(seed, epoch, owner, role_purpose(Purpose::Mosaic, role));
  const auto md = draw_mosaic(mosaic_rng, o.mosaic, o.imgsz, dataset_size);
  SampleRng affine_rng(seed, epoch, owner, role_purpose(Purpose::Perspective, role));
  const auto ad = draw_affine(affine_rng, o);
  const bool perspective = o.perspective != 0.0;
  const bool pastes = o.copy_paste > 0 && role % 2 == 0;
  Sample s = load(source, image_index, o);
  const int ch = md.apply ? 2 * o.imgsz : s.height(), cw = md.apply ? 2 * o.imgsz : s.width();
  const Matrix3 M = affine_matrix(ad, ch, cw, o.imgsz, o.imgsz);
  if (md.apply) {
    std::array<Sample, 4> tiles{std::move(s), load(source, md.others[0], o), load(source, md.others[1], o),
                                load(source, md.others[2], o)};
    const auto placed = mosaic_tiles(tiles, md.xc, md.yc, cw);
    s = Sample{};
    s.index = tiles[0].index;
    s.orig_height = tiles[0].orig_height;
    s.orig_width = tiles[0].orig_width;
    s.instances = mosaic_instances(placed, tiles, cw);
    // The canvas part the warp reads and, with a flip paste, its mirror image (the paste's source).
    std::optional<std::array<int, 4>> window;
    if (!perspective) {
      auto w = warp_affine_source_window(M, ch, cw, o.imgsz, o.imgsz);
      if (pastes && o.copy_paste_mode == CopyPasteMode::Flip && w[2] > w[0]) {
        const int x0 = w[0], x1 = w[2];  // column x reads the mirror's cw - 1 - x
        w[0] = std::min(x0, cw - x1);
        w[2] = std::max(x1, cw - x0);
      }
      window = w;
    }
    s.image = mosaic_canvas(placed, {tiles[0].image, tiles[1].image, tiles[2].image, tiles[3].image}, cw, o.pad_value,
                            window);
  }
  if (pastes && o.copy_paste_mode == CopyPasteMode::Flip) copy_paste_flip(s, o.copy_paste);
  s = random_perspective(std::move(s), M, ad.scale, o.imgsz, o.imgsz, perspective, o.pad_value);
  if (pastes && o.copy_paste_mode == CopyPasteMode::MixUp && has_polygons(s.instances)) {
    SampleRng rng(seed, epoch, owner, role_purpose(Purpose::CopyPaste, role));
    const auto d = draw_partner(rng, o.copy_paste, dataset_size);
    if (d.apply)
      copy_paste_partner(s, pre_transform(source, dataset_size, owner, d.partner, o, seed, epoch, role + 1),
                         o.copy_paste);
  }
  return s;
}

}  // namespace

Sample augment_sample(const SampleSource& source, int64_t dataset_size, int64_t index, const AugmentOptions& o,
                      uint64_t seed, int64_t epoch, std::array<float, 3>* hsv_gains) {
  if (!mixes(o)) {
    PixelPlan plan;
    std::array<torch::Tensor, 4> images;
    Sample s = plan_sample(source, dataset_size, index, o, seed, epoch, plan, hsv_gains, &images);
    s.image = render_pixels(plan, images);
    return s;
  }
  Sample s = pre_transform(source, dataset_size, index, index, o, seed, epoch, 0);
  if (o.mixup > 0) {
    SampleRng rng(seed, epoch, index, Purpose::MixUp);
    const auto d = draw_mixup(rng, o.mixup, dataset_size);
    if (d.partner.apply)
      mixup(s, pre_transform(source, dataset_size, index, d.partner.partner, o, seed, epoch, kMixUpPartner), d.r);
  }
  if (o.cutmix > 0) {
    SampleRng rng(seed, epoch, index, Purpose::CutMix);
    const auto d = draw_cutmix(rng, o.cutmix, dataset_size, s.width(), s.height());
    if (d.partner.apply)
      cutmix(s, pre_transform(source, dataset_size, index, d.partner.partner, o, seed, epoch, kCutMixPartner), d.areas,
             [&](int64_t n) { return choose_area(d.choice_bits, n); });
  }
  SampleRng flip_rng(seed, epoch, index, Purpose::Flip);
  const bool flip_ud = flip_rng.uniform() < o.flipud, flip_lr = flip_rng.uniform() < o.fliplr;
  if (flip_ud) flip_sample(s, /*horizontal=*/false);
  if (flip_lr) flip_sample(s, /*horizontal=*/true);
  if (hsv_gains) {
    SampleRng hsv_rng(seed, epoch, index, Purpose::Hsv);
    *hsv_gains = draw_hsv_gains(hsv_rng, o);
  }
  return s;
}

Sample validation_sample(const SampleSource& source, int64_t index, int out_h, int out_w, const AugmentOptions& o,
                         Letterbox* info) {
  Sample s = load(source, index, o);
  return letterbox(std::move(s), out_h, out_w, /*scaleup=*/false, o.pad_value, info);
}

}  // namespace lucid::data
