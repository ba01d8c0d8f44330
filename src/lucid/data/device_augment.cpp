#include "lucid/data/device_augment.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace lucid::data {

using torch::Tensor;

DeviceImages::DeviceImages(const SampleSource& source, int64_t size, const torch::Device& device) {
  auto image_of = [&](int64_t i) {
    auto img = source(i).image;
    if (!img.defined() || img.dim() != 3 || img.size(2) != 3 || img.scalar_type() != torch::kUInt8 || !img.is_cpu())
      throw std::invalid_argument("DeviceImages: image " + std::to_string(i) + " is not a uint8 (H, W, 3) CPU tensor");
    return img.contiguous();
  };
  // Sizes first, so that the device buffer is allocated once. The images are kept for the packing
  // pass (a prepared set's are views of its store, not copies).
  std::vector<Tensor> images;
  int64_t total = 0, largest = 0;
  for (int64_t i = 0; i < size; ++i) {
    const auto& img = images.emplace_back(image_of(i));
    height_.push_back(int(img.size(0)));
    width_.push_back(int(img.size(1)));
    offset_.push_back(total);
    total += img.size(0) * img.size(1);
    largest = std::max(largest, img.size(0) * img.size(1));
  }
  pixels_ = torch::empty({total}, torch::TensorOptions().dtype(torch::kInt32).device(device));
  // Packed on the host into a staging buffer (pinned for a CUDA device), copied up in chunks.
  const int64_t chunk = std::max<int64_t>(int64_t(16) << 20, largest);
  auto staging = torch::empty({std::min(chunk, std::max<int64_t>(total, 1))},
                              torch::TensorOptions().dtype(torch::kInt32).pinned_memory(device.is_cuda()));
  int32_t* st = staging.data_ptr<int32_t>();
  int64_t start = 0, filled = 0;
  auto flush = [&] {
    if (filled) pixels_.slice(0, start, start + filled).copy_(staging.slice(0, 0, filled));
    start += filled;
    filled = 0;
  };
  for (const auto& img : images) {
    const int64_t n = img.size(0) * img.size(1);
    if (filled + n > staging.numel()) flush();
    const uint8_t* p = img.data_ptr<uint8_t>();
    for (int64_t k = 0; k < n; ++k, p += 3) st[filled + k] = int32_t(p[0]) | int32_t(p[1]) << 8 | int32_t(p[2]) << 16;
    filled += n;
  }
  flush();
}

namespace {

// Layout of a plan's row in the uploaded per-sample table (doubles: the single-precision map and
// every integer are exact in them).
constexpr int kMap = 0;  // 9 entries: the inverse map
constexpr int kXc = 9, kYc = 10, kCanvasW = 11, kCanvasH = 12;
constexpr int kFlipUd = 13, kFlipLr = 14, kPerspective = 15;
constexpr int kRow = 16;

// Per-axis look-ups of the canvases, so that a neighbour costs two small gathers and one pixel read:
// canvas pixel (cx, cy) of sample b reads pixels[col[b][qy][cx] + row[b][qx][cy]] where its tile is
// q = qx + 2 qy (the quadrant about (xc, yc)), with
//   col[b][qy][cx] = base_q + cx   for q = (cx >= xc) + 2 qy, when x0_q <= cx < x1_q,
//   row[b][qx][cy] = cy * width_q  for q = qx + 2 (cy >= yc), when y0_q <= cy < y1_q,
// base_q placing the tile's image in the pixel buffer, and kOutside elsewhere, which makes the sum
// negative: pad. Coordinates run from -2 (cell's rejected positions) to the canvas size (the right or
// lower neighbour of the last cell).
constexpr int64_t kOutside = -(int64_t(1) << 52);

struct Tables {
  Tensor samples;  // (B, kRow) double
  Tensor axes;     // flat int64: col (B, 2, lx), then row (B, 2, ly)
  int64_t lx = 0, ly = 0;
};

// A pixel's RGBX int32 read back as its bytes R, G, B (little-endian: the low byte first).
static_assert(std::endian::native == std::endian::little);

Tensor f64(const Tensor& t) { return t.to(torch::kDouble); }

// warp.cpp's single-precision fused multiply-add a * b + c (a, b single precision or small integers):
// the product is exact in double, so c + a * b in double (addcmul: one rounding, fused or not),
// rounded to single. `a` is double, so the kernel casts the other operands as it reads them.
Tensor fma32(const Tensor& a, const Tensor& b, const Tensor& c) { return torch::addcmul(c, a, b).to(torch::kFloat); }

// The source cell of each position s (float) along an axis of `size` pixels: the index of its left
// (upper) neighbour and its fraction. A position outside [-1, size) (or NaN) makes the whole pixel
// border in warp.cpp; it gets cell -2 here, whose two neighbours lie outside every tile.
std::pair<Tensor, Tensor> cell(Tensor s, const Tensor& size) {
  const auto inside = (s >= -1) & (s < size);
  s = torch::where(inside, s, -2.f);
  auto k = s.floor();
  return {k.to(torch::kInt), s - k};
}

void check_plans(const DeviceImages& images, const std::vector<PixelPlan>& plans) {
  if (plans.empty()) throw std::invalid_argument("render_batch: no plans");
  for (const auto& p : plans) {
    if (p.out_h != plans[0].out_h || p.out_w != plans[0].out_w)
      throw std::invalid_argument("render_batch: plans differ in output size");
    for (const auto& t : p.tiles) {
      if (t.x1 <= t.x0 || t.y1 <= t.y0) continue;
      if (t.index < 0 || t.index >= images.size())
        throw std::invalid_argument("render_batch: tile image " + std::to_string(t.index) + " not uploaded");
      if (t.src_x < 0 || t.src_y < 0 || t.src_x + (t.x1 - t.x0) > images.width(t.index) ||
          t.src_y + (t.y1 - t.y0) > images.height(t.index))
        throw std::invalid_argument("render_batch: tile outside image " + std::to_string(t.index));
    }
  }
}

// The plans' tables, built on the host and uploaded without blocking (pinned) to the images' device.
Tables make_tables(const DeviceImages& images, const std::vector<PixelPlan>& plans) {
  const auto device = images.device();
  const int64_t B = int64_t(plans.size());
  Tables t;
  for (const auto& p : plans)
    t.lx = std::max<int64_t>(t.lx, p.canvas_w + 3), t.ly = std::max<int64_t>(t.ly, p.canvas_h + 3);
  const auto pinned = torch::TensorOptions().pinned_memory(device.is_cuda());
  t.samples = torch::empty({B, kRow}, pinned.dtype(torch::kDouble));
  t.axes = torch::full({B * 2 * (t.lx + t.ly)}, kOutside, pinned.dtype(torch::kLong));
  double* row = t.samples.data_ptr<double>();
  int64_t* col_b = t.axes.data_ptr<int64_t>();
  int64_t* row_b = col_b + B * 2 * t.lx;
  for (const auto& p : plans) {
    const auto m = detail::inverse_map(p.M, p.perspective);
    std::copy(m.begin(), m.end(), row + kMap);
    row[kXc] = p.xc, row[kYc] = p.yc, row[kCanvasW] = p.canvas_w, row[kCanvasH] = p.canvas_h;
    row[kFlipUd] = p.flip_ud, row[kFlipLr] = p.flip_lr, row[kPerspective] = p.perspective;
    row += kRow;
    for (int q = 0; q < 4; ++q) {
      const auto& tile = p.tiles[q];
      if (tile.x1 <= tile.x0 || tile.y1 <= tile.y0) continue;
      const int64_t w = images.width(tile.index);
      const int64_t base = images.offset(tile.index) + int64_t(tile.src_y - tile.y0) * w + (tile.src_x - tile.x0);
      // Tile q lies in its quadrant: its columns fill col[qy = q / 2], its rows row[qx = q % 2].
      int64_t* col = col_b + (q / 2) * t.lx + 2;
      for (int64_t cx = tile.x0; cx < tile.x1; ++cx) col[cx] = base + cx;
      int64_t* r = row_b + (q % 2) * t.ly + 2;
      for (int64_t cy = tile.y0; cy < tile.y1; ++cy) r[cy] = cy * w;
    }
    col_b += 2 * t.lx;
    row_b += 2 * t.ly;
  }
  if (device.is_cuda()) {
    t.samples = t.samples.to(device, /*non_blocking=*/true);
    t.axes = t.axes.to(device, /*non_blocking=*/true);
  }
  return t;
}

}  // namespace

Tensor render_batch(const DeviceImages& images, const std::vector<PixelPlan>& plans) {
  check_plans(images, plans);
  const auto dev = images.device();
  const int64_t B = int64_t(plans.size()), H = plans[0].out_h, W = plans[0].out_w;
  const auto tables = make_tables(images, plans);
  auto column = [&](int k) { return tables.samples.select(1, k).view({B, 1, 1}); };
  auto m = [&](int k) { return column(kMap + k).to(torch::kFloat); };
  auto m64 = [&](int k) { return column(kMap + k); };  // the same values, in double
  auto flag = [&](int k) { return column(k).ne(0); };
  const auto lopts = torch::TensorOptions().dtype(torch::kLong).device(dev);

  // Output pixel -> its position before the flips (vertical, then horizontal, after the warp).
  const auto xs = torch::arange(W, lopts).view({1, 1, W}), ys = torch::arange(H, lopts).view({1, H, 1});
  const auto xp = torch::where(flag(kFlipLr), (W - 1) - xs, xs);  // (B, 1, W)
  const auto yp = torch::where(flag(kFlipUd), (H - 1) - ys, ys);  // (B, H, 1)
  const auto fx = xp.to(torch::kFloat), fy = yp.to(torch::kFloat);

  // Source positions on the canvas, in warp.cpp's order of operations.
  bool any_affine = false, any_perspective = false;
  for (const auto& p : plans) (p.perspective ? any_perspective : any_affine) = true;
  Tensor sx, sy;
  if (any_affine) {
    const auto ry_x = fy * m(1), ry_y = fy * m(4);  // products rounded before the additions
    sx = fma32(m64(0), fx, ry_x + m(2));
    sy = fma32(m64(3), fx, ry_y + m(5));
    const int64_t vec_end = (W / detail::kWarpLanes) * detail::kWarpLanes;
    if (vec_end < W) {  // OpenCV's scalar tail of each row
      const auto tail = xp >= vec_end;
      sx = torch::where(tail, fma32(m64(0), fx, ry_x) + m(2), sx);
      sy = torch::where(tail, fma32(m64(3), fx, ry_y) + m(5), sy);
    }
  }
  if (any_perspective) {
    const auto w = f64(fma32(m64(6), fx, fy * m(7) + m(8)));  // a float quotient, correctly rounded via double
    const auto px = (f64(fma32(m64(0), fx, fy * m(1) + m(2))) / w).to(torch::kFloat);
    const auto py = (f64(fma32(m64(3), fx, fy * m(4) + m(5))) / w).to(torch::kFloat);
    const auto persp = flag(kPerspective);
    sx = any_affine ? torch::where(persp, px, sx) : px;
    sy = any_affine ? torch::where(persp, py, sy) : py;
  }
  const auto [ix, ax] = cell(sx, column(kCanvasW).to(torch::kFloat));
  const auto [iy, ay] = cell(sy, column(kCanvasH).to(torch::kFloat));

  // The four neighbours (ix + dx, iy + dy): their quadrant bits and their entries in the axis tables
  // (32-bit: the tables are small).
  const auto b = torch::arange(B, lopts.dtype(torch::kInt)).view({B, 1, 1});
  const auto xc = column(kXc).to(torch::kInt), yc = column(kYc).to(torch::kInt);
  const Tensor qx[2] = {ix >= xc, ix >= xc - 1}, qy[2] = {iy >= yc, iy >= yc - 1};
  const int64_t lx = tables.lx, ly = tables.ly, rows = B * 2 * lx;
  const auto cx0 = ix + (b * (2 * lx) + 2), cy0 = iy + (b * (2 * ly) + 2 + rows);
  const Tensor col_at[2][2] = {{cx0, cx0 + lx}, {cx0 + 1, cx0 + (1 + lx)}};  // [dx][qy]
  const Tensor row_at[2][2] = {{cy0, cy0 + ly}, {cy0 + 1, cy0 + (1 + ly)}};  // [dy][qx]
  const int32_t pad = plans[0].pad_value * (1 + (1 << 8) + (1 << 16));
  auto lookup = [&](const Tensor& at) { return tables.axes.index_select(0, at.reshape({-1})).view({B, H, W}); };
  auto read = [&](int dx, int dy) {
    const auto index = lookup(torch::where(qy[dy], col_at[dx][1], col_at[dx][0])) +
                       lookup(torch::where(qx[dx], row_at[dy][1], row_at[dy][0]));
    const auto rgbx = torch::where(index >= 0, images.pixels().take(index.clamp_min(0)), pad);
    return rgbx.view(torch::kUInt8).view({B, H, W, 4}).permute({0, 3, 1, 2}).narrow(1, 0, 3);  // (B, 3, H, W) view
  };
  const auto p00 = read(0, 0), p01 = read(1, 0), p10 = read(0, 1), p11 = read(1, 1);

  // Bilinear blend as warp.cpp: along x, then y, rounded half to even. Convex combinations of bytes,
  // so always within [0, 255].
  const auto axc = f64(ax).unsqueeze(1), ayc = f64(ay).unsqueeze(1);
  auto diff = [](const Tensor& a, const Tensor& b) { return a.to(torch::kShort) - b; };
  const auto v0 = fma32(axc, diff(p01, p00), p00), v1 = fma32(axc, diff(p11, p10), p10);
  // The byte views make the blend channels-last; the batch is (B, 3, H, W) contiguous, as the CPU's.
  return fma32(ayc, v1 - v0, v0).round().to(torch::kUInt8).contiguous();
}

}  // namespace lucid::data
