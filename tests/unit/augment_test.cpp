// Augmentation geometry, mask rasterisation, random streams and the batch loader.
#include <gtest/gtest.h>

#include <ATen/core/PhiloxRNGEngine.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <sstream>
#include <thread>

#include "lucid/data/augment.h"
#include "lucid/data/device_augment.h"
#include "lucid/data/hsv.h"
#include "lucid/data/loader.h"
#include "lucid/data/masks.h"
#include "lucid/data/polygon.h"
#include "lucid/data/warp.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/error.h"
#include "lucid/util/parallel.h"
#include "pixel_cases.h"

using namespace lucid::data;
using torch::Tensor;

namespace {

// An (h, w, 3) image whose pixel (y, x) is (tag, y % 256, x % 256).
Tensor tagged_image(int h, int w, int tag) {
  auto img = torch::empty({h, w, 3}, torch::kUInt8);
  auto* p = img.data_ptr<uint8_t>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      p[(y * w + x) * 3 + 0] = uint8_t(tag);
      p[(y * w + x) * 3 + 1] = uint8_t(y % 256);
      p[(y * w + x) * 3 + 2] = uint8_t(x % 256);
    }
  return img;
}

std::vector<float> rect_polygon(float x0, float y0, float x1, float y1) { return {x0, y0, x1, y0, x1, y1, x0, y1}; }

Sample make_sample(int h, int w, int tag) {
  Sample s;
  s.image = tagged_image(h, w, tag);
  s.orig_height = h * 2;
  s.orig_width = w * 2;
  return s;
}

int count_ones(const Tensor& t) { return int(t.ne(0).sum().item<int64_t>()); }

}  // namespace

// ---- Random streams ------------------------------------------------------------------------------

TEST(SampleRng, PhiloxMatchesATen) {
  for (uint64_t seed : {uint64_t(0), uint64_t(12345), uint64_t(0xDEADBEEFCAFEF00Dull)})
    for (uint64_t sub : {uint64_t(0), uint64_t(7), uint64_t(0x123456789ull)}) {
      at::Philox4_32 engine(seed, sub, 0);
      for (uint32_t block = 0; block < 3; ++block) {
        auto mine =
            philox4x32_10({block, 0u, uint32_t(sub), uint32_t(sub >> 32)}, {uint32_t(seed), uint32_t(seed >> 32)});
        for (int k = 0; k < 4; ++k) EXPECT_EQ(mine[k], engine()) << seed << " " << sub << " " << block;
      }
    }
  // Random123 known answer: counter 0, key 0.
  auto zero = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(zero[0], 0x6627e8d5u);
  EXPECT_EQ(zero[1], 0xe169c58du);
  EXPECT_EQ(zero[2], 0xbc57ac4cu);
  EXPECT_EQ(zero[3], 0x9b00dbd8u);
}

TEST(SampleRng, StreamsAreKeyedAndUniform) {
  SampleRng a(1, 2, 3, Purpose::Mosaic), b(1, 2, 3, Purpose::Mosaic);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u32(), b.next_u32());
  std::set<uint32_t> firsts;
  for (uint64_t seed : {0, 1})
    for (int64_t epoch : {0, 1})
      for (int64_t index : {0, 1, 1000000})
        for (auto p : {Purpose::Mosaic, Purpose::Flip}) firsts.insert(SampleRng(seed, epoch, index, p).next_u32());
  EXPECT_EQ(firsts.size(), 24u);
  SampleRng r(42, 0, 0, Purpose::Test);
  double sum = 0;
  int below[5] = {0};
  for (int i = 0; i < 20000; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    below[r.below(5)]++;
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(below[k], 4000, 250);
}

// ---- Polygons ------------------------------------------------------------------------------------

TEST(Polygon, ResampleKeepsVerticesAndInterpolates) {
  auto sq = rect_polygon(0, 0, 4, 4);   // 4 vertices, closed = 5 positions
  auto r10 = resample_polygon(sq, 10);  // linspace(0, 4, 5) merged with 0..4: every position twice
  ASSERT_EQ(r10.size(), 20u);
  const float expect10[10][2] = {{0, 0}, {0, 0}, {4, 0}, {4, 0}, {4, 4}, {4, 4}, {0, 4}, {0, 4}, {0, 0}, {0, 0}};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r10[2 * i], expect10[i][0]) << i;
    EXPECT_EQ(r10[2 * i + 1], expect10[i][1]) << i;
  }
  auto r12 = resample_polygon(sq, 12);  // linspace(0, 4, 7): 0, 2/3, 4/3, 2, 8/3, 10/3, 4
  ASSERT_EQ(r12.size(), 24u);
  const double pos[12] = {0, 0, 2.0 / 3, 1, 4.0 / 3, 2, 2, 8.0 / 3, 3, 10.0 / 3, 4, 4};
  for (int i = 0; i < 12; ++i) {
    double t = pos[i];
    int k = std::min(int(std::floor(t)), 3);
    double f = t - k;
    const double vx[5] = {0, 4, 4, 0, 0}, vy[5] = {0, 0, 4, 4, 0};
    EXPECT_NEAR(r12[2 * i], vx[k] + (vx[k + 1] - vx[k]) * f, 1e-5) << i;
    EXPECT_NEAR(r12[2 * i + 1], vy[k] + (vy[k + 1] - vy[k]) * f, 1e-5) << i;
  }
  // Count rule: one more than the longest polygon when it exceeds n.
  SampleInstances in;
  std::vector<float> long_poly;
  for (int i = 0; i < 12; ++i) long_poly.insert(long_poly.end(), {float(i), float(i % 3)});
  in.push_back(0, long_poly, {0, 0, 11, 2});
  in.push_back(1, sq, {0, 0, 4, 4});
  in.push_back(2, {}, {1, 1, 2, 2});
  resample_polygons(in, 10);
  EXPECT_EQ(in.polygons[0].size(), 26u);
  EXPECT_EQ(in.polygons[1].size(), 26u);
  EXPECT_TRUE(in.polygons[2].empty());
}

TEST(Polygon, BoxClipsToImage) {
  EXPECT_EQ(polygon_box(rect_polygon(1, 2, 5, 7), 10, 10), (Box{1, 2, 5, 7}));
  // Triangle crossing the right border: (8,2) (14,5) (8,8): crossings at x = 10 are y = 3 and 7.
  Box b = polygon_box({8, 2, 14, 5, 8, 8}, 10, 10);
  EXPECT_FLOAT_EQ(b[0], 8);
  EXPECT_FLOAT_EQ(b[1], 2);
  EXPECT_FLOAT_EQ(b[2], 10);
  EXPECT_FLOAT_EQ(b[3], 8);
  // Large diamond around the image: only corners inside and border crossings.
  Box d = polygon_box({5, -20, 30, 5, 5, 30, -20, 5}, 10, 10);
  EXPECT_EQ(d, (Box{0, 0, 10, 10}));
  // Entirely outside.
  EXPECT_EQ(polygon_box(rect_polygon(20, 20, 30, 30), 10, 10), (Box{0, 0, 0, 0}));
  EXPECT_EQ(point_in_polygon(rect_polygon(0, 0, 4, 4), 2, 2), 1);
  EXPECT_EQ(point_in_polygon(rect_polygon(0, 0, 4, 4), 4, 2), 0);
  EXPECT_EQ(point_in_polygon(rect_polygon(0, 0, 4, 4), 5, 2), -1);
}

// ---- Mosaic --------------------------------------------------------------------------------------

TEST(Mosaic, PlacesTilesAndShiftsLabels) {
  const int s = 64;  // canvas 128 x 128
  std::array<Sample, 4> tiles;
  const int sizes[4][2] = {{48, 64}, {64, 40}, {30, 50}, {64, 64}};  // (h, w)
  for (int i = 0; i < 4; ++i) {
    tiles[i] = make_sample(sizes[i][0], sizes[i][1], 10 * (i + 1));
    tiles[i].index = i;
    const float w = float(sizes[i][1]), h = float(sizes[i][0]);
    // One instance covering the middle of the tile, one in its top-left corner.
    tiles[i].instances.push_back(i, rect_polygon(w / 4, h / 4, 3 * w / 4, 3 * h / 4),
                                 {w / 4, h / 4, 3 * w / 4, 3 * h / 4});
    tiles[i].instances.push_back(10 + i, rect_polygon(0, 0, 4, 4), {0, 0, 4, 4});
  }
  const int xc = 70, yc = 40;
  Sample m = mosaic4(std::move(tiles), xc, yc, s, 114);
  ASSERT_EQ(m.height(), 128);
  ASSERT_EQ(m.width(), 128);
  EXPECT_EQ(m.index, 0);
  auto px = [&](int y, int x, int c) { return int(m.image[y][x][c].item<uint8_t>()); };
  // Tile 0 (48 x 64) ends at (70, 40): canvas [6, 70) x [0, 40) shows its rows 8..47, columns 0..63.
  EXPECT_EQ(px(0, 6, 0), 10);
  EXPECT_EQ(px(0, 6, 1), 8);
  EXPECT_EQ(px(0, 6, 2), 0);
  EXPECT_EQ(px(39, 69, 1), 47);
  EXPECT_EQ(px(39, 69, 2), 63);
  EXPECT_EQ(px(0, 5, 0), 114);  // left of tile 0
  // Tile 1 (64 x 40) starts at x = 70, bottom at y = 40: rows 24..63.
  EXPECT_EQ(px(0, 70, 0), 20);
  EXPECT_EQ(px(0, 70, 1), 24);
  EXPECT_EQ(px(0, 109, 2), 39);
  EXPECT_EQ(px(0, 110, 0), 114);
  // Tile 2 (30 x 50) ends at x = 70 from y = 40: canvas [20, 70) x [40, 70).
  EXPECT_EQ(px(40, 20, 0), 30);
  EXPECT_EQ(px(69, 69, 1), 29);
  EXPECT_EQ(px(70, 40, 0), 114);
  EXPECT_EQ(px(40, 19, 0), 114);
  // Tile 3 (64 x 64) from (70, 40), cropped at x = 128: columns 0..57.
  EXPECT_EQ(px(40, 70, 0), 40);
  EXPECT_EQ(px(103, 127, 2), 57);
  EXPECT_EQ(px(104, 70, 0), 114);

  // Labels. Tile 0 pad (6, -8): its corner box (0, 0, 4, 4) -> (6, -8, 10, -4), clipped to zero
  // height and dropped. Tile 1 pad (70, -24): middle box (10, 16, 30, 48) -> (80, -8, 100, 24) ->
  // clipped (80, 0, 100, 24); corner box dropped. Tiles 2 (pad (20, 40)) and 3 (pad (70, 40)) keep
  // both.
  std::vector<int32_t> expect_cls = {0, 1, 2, 12, 3, 13};
  EXPECT_EQ(m.instances.cls, expect_cls);
  const std::vector<Box> expect_boxes = {{22, 4, 54, 28},  {80, 0, 100, 24},  {32.5f, 47.5f, 57.5f, 62.5f},
                                         {20, 40, 24, 44}, {86, 56, 118, 88}, {70, 40, 74, 44}};
  EXPECT_EQ(m.instances.boxes, expect_boxes);
  EXPECT_EQ(m.instances.polygons[1], rect_polygon(80, 0, 100, 24));
  EXPECT_EQ(m.instances.polygons[3], rect_polygon(20, 40, 24, 44));
}

// ---- Random perspective ------------------------------------------------------------------------------

TEST(Perspective, MatrixMatchesHandComputation) {
  AffineDraw d;
  d.degrees = 30;
  d.scale = 1.2;
  d.shear_x = 5;
  d.shear_y = -3;
  d.translate_x = 0.45;
  d.translate_y = 0.55;
  const int in_h = 80, in_w = 100, out_h = 64, out_w = 72;
  Matrix3 M = affine_matrix(d, in_h, in_w, out_h, out_w);
  // By hand: rotation-scale about the origin after centring, then shear, then translation.
  const double a = 1.2 * std::cos(std::numbers::pi / 6), b = 1.2 * std::sin(std::numbers::pi / 6);
  const double kx = std::tan(5 * std::numbers::pi / 180), ky = std::tan(-3 * std::numbers::pi / 180);
  const double cx = 50, cy = 40;
  const double r0[3] = {a, b, -a * cx - b * cy}, r1[3] = {-b, a, b * cx - a * cy};
  const double e[9] = {r0[0] + kx * r1[0],
                       r0[1] + kx * r1[1],
                       r0[2] + kx * r1[2] + 0.45 * out_w,
                       ky * r0[0] + r1[0],
                       ky * r0[1] + r1[1],
                       ky * r0[2] + r1[2] + 0.55 * out_h,
                       0,
                       0,
                       1};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(M[i], e[i], 1e-12) << i;
  // The centre of the input goes to the translation point.
  EXPECT_NEAR(M[0] * cx + M[1] * cy + M[2], 0.45 * out_w, 1e-12);
  EXPECT_NEAR(M[3] * cx + M[4] * cy + M[5], 0.55 * out_h, 1e-12);
  // Perspective terms enter through P.
  d.perspective_x = 0.001;
  Matrix3 Mp = affine_matrix(d, in_h, in_w, out_h, out_w);
  EXPECT_NEAR(Mp[6], 0.001, 1e-12);
  EXPECT_NEAR(Mp[8], 1 - 0.001 * cx, 1e-12);
}

TEST(Perspective, TransformsPolygonsBoxesAndFilters) {
  Sample s = make_sample(80, 100, 1);
  // A: inside after the transform; B: pushed partly outside; C: shrinks below 2 px.
  s.instances.push_back(0, rect_polygon(40, 30, 60, 50), {40, 30, 60, 50});
  s.instances.push_back(1, rect_polygon(0, 0, 30, 20), {0, 0, 30, 20});
  s.instances.push_back(2, rect_polygon(70, 60, 72, 61), {70, 60, 72, 61});
  AffineDraw d;
  d.scale = 0.8;
  d.translate_x = 0.4;
  d.translate_y = 0.5;
  Matrix3 M = affine_matrix(d, 80, 100, 64, 64);  // x' = 0.8 (x - 50) + 25.6, y' = 0.8 (y - 40) + 32
  auto out = random_perspective(std::move(s), M, d.scale, 64, 64, false);
  ASSERT_EQ(out.height(), 64);
  ASSERT_EQ(out.width(), 64);
  ASSERT_EQ(out.instances.size(), 2u);
  EXPECT_EQ(out.instances.cls, (std::vector<int32_t>{0, 1}));
  auto tx = [](double x) { return float(0.8 * (x - 50) + 25.6); };
  auto ty = [](double y) { return float(0.8 * (y - 40) + 32); };
  const auto& a = out.instances.boxes[0];
  EXPECT_NEAR(a[0], tx(40), 1e-4);
  EXPECT_NEAR(a[1], ty(30), 1e-4);
  EXPECT_NEAR(a[2], tx(60), 1e-4);
  EXPECT_NEAR(a[3], ty(50), 1e-4);
  const auto& pa = out.instances.polygons[0];
  EXPECT_NEAR(pa[2], tx(60), 1e-4);
  EXPECT_NEAR(pa[3], ty(30), 1e-4);
  // B: (0, 0, 30, 20) -> (-14.4, 0, 9.6, 16): clipped at x = 0.
  const auto& bb = out.instances.boxes[1];
  EXPECT_NEAR(bb[0], 0, 1e-5);
  EXPECT_NEAR(bb[1], 0, 1e-4);
  EXPECT_NEAR(bb[2], tx(30), 1e-4);
  EXPECT_NEAR(bb[3], ty(20), 1e-4);
  for (size_t k = 0; k < out.instances.polygons[1].size(); k += 2) EXPECT_GE(out.instances.polygons[1][k], 0.f);
  // Image: the output pixel at the centre of the output samples the input near its centre.
  // (0.8 (x - 50) + 25.6 = 25.6 at x = 50.)
  EXPECT_EQ(out.image[32][26][0].item<uint8_t>(), 1);
  // Output (5, 10) samples input x = (5 - 25.6) / 0.8 + 50 = 24.25: the x tag interpolates to 24.
  EXPECT_EQ(out.image[10][5][2].item<uint8_t>(), 24);
}

TEST(Warp, AffineTranslationScaleAndBorder) {
  auto img = tagged_image(20, 30, 7);
  Matrix3 shift = {1, 0, 3, 0, 1, -2, 0, 0, 1};  // out(x, y) = in(x - 3, y + 2)
  auto out = warp_affine(img, shift, 20, 30, 114);
  EXPECT_TRUE(torch::equal(out.slice(0, 0, 18).slice(1, 3, 30), img.slice(0, 2, 20).slice(1, 0, 27)));
  EXPECT_EQ(out[5][2][0].item<uint8_t>(), 114);
  EXPECT_EQ(out[18][10][0].item<uint8_t>(), 114);
  Matrix3 half = {1, 0, 0.5, 0, 1, 0, 0, 0, 1};  // samples x - 0.5: mean of two columns, half to even
  auto h = warp_affine(img, half, 20, 30, 114);
  for (int x = 1; x < 30; ++x) EXPECT_EQ(int(h[4][x][2].item<uint8_t>()), int(std::nearbyint(x - 0.5))) << x;
  EXPECT_EQ(int(h[4][0][2].item<uint8_t>()), 57);  // left neighbour is border: (114 + 0) / 2
  Matrix3 down = {0.5, 0, 0, 0, 0.5, 0, 0, 0, 1};
  auto dn = warp_affine(img, down, 10, 15, 114);
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 15; ++x) ASSERT_TRUE(torch::equal(dn[y][x], img[2 * y][2 * x]));
  // Identity at the same size is exact; warp_perspective with an affine matrix equals warp_affine.
  Matrix3 rot = {0.9, 0.2, 1.5, -0.2, 0.9, 3.25, 0, 0, 1};
  auto wa = warp_affine(img, rot, 20, 30, 114), wp = warp_perspective(img, rot, 20, 30, 114);
  EXPECT_LE((wa.to(torch::kInt) - wp.to(torch::kInt)).abs().max().item<int>(), 1);
}

// The fast path for maps without rotation or shear (the default augmentation), with and without its
// AVX2 loops, equals the per-pixel definition byte for byte: scales up and down, mirrored, partly or
// wholly outside the source, 1 and 3 channels, widths with and without a 16-pixel tail.
TEST(Warp, SeparablePathEqualsPointwise) {
  SampleRng rng(11, 0, 0, Purpose::Test);
  for (int t = 0; t < 60; ++t) {
    const int cn = t % 5 == 4 ? 1 : 3;
    const int ih = 40 + int(rng.below(90)), iw = 40 + int(rng.below(90));
    const int oh = 30 + int(rng.below(70)), ow = 30 + int(rng.below(70));
    auto img = torch::empty({ih, iw, cn}, torch::kUInt8);
    for (int64_t k = 0; k < img.numel(); ++k) img.data_ptr<uint8_t>()[k] = uint8_t(rng.next_u32());
    const double sx = rng.uniform(0.3, 2.5) * (t % 7 == 3 ? -1 : 1), sy = rng.uniform(0.3, 2.5);
    const double tx = rng.uniform(-1.0, 1.5) * ow, ty = rng.uniform(-1.0, 1.5) * oh;
    const Matrix3 M = {sx, 0, tx - sx * iw / 2, 0, sy, ty - sy * ih / 2, 0, 0, 1};
    const auto want = lucid::data::detail::warp_affine_pointwise(img, M, oh, ow, 114);
    ASSERT_TRUE(torch::equal(warp_affine(img, M, oh, ow, 114), want)) << "case " << t;
    const bool was = lucid::data::detail::set_warp_simd(false);
    const auto plain = warp_affine(img, M, oh, ow, 114);
    lucid::data::detail::set_warp_simd(was);
    ASSERT_TRUE(torch::equal(plain, want)) << "case " << t << " without AVX2";
  }
}

TEST(Warp, ResizeLinear) {
  auto img = tagged_image(8, 12, 3);
  // Exact halving averages 2 x 2 blocks.
  auto h = resize_linear(img, 4, 6);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) {
      EXPECT_EQ(int(h[y][x][1].item<uint8_t>()), (2 * y + 2 * y + 2 * y + 1 + 2 * y + 1 + 2) / 4);
      EXPECT_EQ(int(h[y][x][2].item<uint8_t>()), (8 * x + 4) / 4);
    }
  // Upscaling a constant image keeps it; long-side resize keeps the aspect with ceil.
  auto c = torch::full({5, 7, 3}, 77, torch::kUInt8);
  EXPECT_TRUE(resize_linear(c, 13, 9).eq(77).all().item<bool>());
  auto r = resize_long_side(torch::zeros({30, 47, 3}, torch::kUInt8), 64);
  EXPECT_EQ(r.size(0), 41);  // ceil(30 * 64 / 47) = ceil(40.85)
  EXPECT_EQ(r.size(1), 64);
}

// ---- Flips ---------------------------------------------------------------------------------------

TEST(Flip, HorizontalAndVertical) {
  Sample s = make_sample(4, 6, 2);
  s.instances.push_back(0, {1, 0, 3, 0, 3, 2}, {1, 0, 3, 2});
  Sample h = s;
  h.image = s.image.clone();
  flip_sample(h, true);
  for (int x = 0; x < 6; ++x) EXPECT_EQ(h.image[1][x][2].item<uint8_t>(), 5 - x);
  EXPECT_EQ(h.instances.boxes[0], (Box{3, 0, 5, 2}));
  EXPECT_EQ(h.instances.polygons[0], (std::vector<float>{5, 0, 3, 0, 3, 2}));
  Sample v = s;
  v.image = s.image.clone();
  flip_sample(v, false);
  for (int y = 0; y < 4; ++y) EXPECT_EQ(v.image[y][2][1].item<uint8_t>(), 3 - y);
  EXPECT_EQ(v.instances.boxes[0], (Box{1, 2, 3, 4}));
  EXPECT_EQ(v.instances.polygons[0], (std::vector<float>{1, 4, 3, 4, 3, 2}));
}

// ---- Rasteriser ----------------------------------------------------------------------------------

TEST(Masks, FillPolygonKnownShapes) {
  std::vector<uint8_t> img(16 * 16, 0);
  fill_polygon(img.data(), 16, 16, {2, 3, 7, 3, 7, 9, 2, 9}, 1);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x)
      EXPECT_EQ(img[y * 16 + x], (x >= 2 && x <= 7 && y >= 3 && y <= 9) ? 1 : 0) << x << "," << y;
  std::fill(img.begin(), img.end(), 0);
  fill_polygon(img.data(), 16, 16, {0, 0, 10, 0, 0, 10}, 1);  // right triangle: x + y <= 10
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) EXPECT_EQ(img[y * 16 + x], (x + y <= 10) ? 1 : 0) << x << "," << y;
  // Vertices outside the image are clipped: a square covering the whole image fills it.
  std::fill(img.begin(), img.end(), 0);
  fill_polygon(img.data(), 16, 16, {-5, -5, 20, -5, 20, 20, -5, 20}, 1);
  EXPECT_EQ(std::count(img.begin(), img.end(), 1), 256);
  EXPECT_EQ(truncate_vertices({2.9f, -0.5f, 16.0f, 3.99f}), (std::vector<int32_t>{2, 0, 16, 3}));
}

TEST(Masks, DownsampleRule) {
  // Full-resolution square 4..9: mask pixel (i, j) samples rows/columns 4i+1, 4i+2.
  auto m = polygon_mask(rect_polygon(4, 4, 9, 9), 32, 32, 4);
  ASSERT_EQ(m.sizes(), (torch::IntArrayRef{8, 8}));
  EXPECT_EQ(count_ones(m), 3);
  EXPECT_EQ(m[1][1].item<uint8_t>(), 1);
  EXPECT_EQ(m[1][2].item<uint8_t>(), 1);
  EXPECT_EQ(m[2][1].item<uint8_t>(), 1);
  EXPECT_EQ(m[2][2].item<uint8_t>(), 0);
  EXPECT_EQ(count_ones(polygon_mask(rect_polygon(0, 0, 31.5f, 31.5f), 32, 32, 4)), 64);
}

TEST(Masks, WindowedMatchesDense) {
  SampleRng rng(5, 0, 0, Purpose::Test);
  const int H = 48, W = 64;
  for (int t = 0; t < 300; ++t) {
    const int n = 3 + int(rng.below(12));
    std::vector<float> poly;
    const double cx = rng.uniform(-10, W + 10), cy = rng.uniform(-10, H + 10), rad = rng.uniform(1, 40);
    for (int k = 0; k < n; ++k) {
      const double ang = 2 * std::numbers::pi * k / n + rng.uniform(0, 0.5), rr = rad * rng.uniform(0.3, 1.0);
      float x = float(cx + rr * std::cos(ang)), y = float(cy + rr * std::sin(ang));
      if (t % 3 == 0) x = std::clamp(x, 0.f, float(W)), y = std::clamp(y, 0.f, float(H));
      poly.insert(poly.end(), {x, y});
    }
    std::vector<uint8_t> full(H * W, 0);
    fill_polygon(full.data(), H, W, truncate_vertices(poly), 1);
    auto m = polygon_mask(poly, H, W, 4);
    for (int i = 0; i < H / 4; ++i)
      for (int j = 0; j < W / 4; ++j) {
        int s = full[(4 * i + 1) * W + 4 * j + 1] + full[(4 * i + 1) * W + 4 * j + 2] +
                full[(4 * i + 2) * W + 4 * j + 1] + full[(4 * i + 2) * W + 4 * j + 2];
        ASSERT_EQ(m[i][j].item<uint8_t>(), s >= 2 ? 1 : 0) << t << " " << i << " " << j;
      }
  }
}

TEST(Masks, OverlapAndSemanticTargets) {
  SampleInstances in;
  in.push_back(7, {10, 10, 10.5f, 10, 10.5f, 10.5f}, {10, 10, 10.5f, 10.5f});  // vanishes at 1/4
  in.push_back(3, rect_polygon(0, 0, 31, 31), {0, 0, 31, 31});                 // large
  in.push_back(5, rect_polygon(8, 8, 15, 15), {8, 8, 15, 15});                 // small, inside the large
  in.push_back(4, {}, {1, 1, 2, 2});                                           // box only
  auto t = make_mask_targets(in, 32, 32, 4, true);
  // Empty masks first (in instance order), then area descending.
  EXPECT_EQ(t.order, (std::vector<int64_t>{0, 3, 1, 2}));
  ASSERT_EQ(t.masks.scalar_type(), torch::kUInt8);
  EXPECT_EQ(t.masks[0][0].item<uint8_t>(), 3);  // large = rank 2 -> value 3
  EXPECT_EQ(t.masks[2][2].item<uint8_t>(), 4);  // small overwrites
  EXPECT_EQ(t.sem[0][0].item<int32_t>(), 3);
  EXPECT_EQ(t.sem[2][2].item<int32_t>(), 5);
  auto nt = make_mask_targets(in, 32, 32, 4, false);
  ASSERT_EQ(nt.masks.sizes(), (torch::IntArrayRef{4, 8, 8}));
  EXPECT_EQ(count_ones(nt.masks[0]), 0);
  EXPECT_EQ(count_ones(nt.masks[1]), 64);
  EXPECT_EQ(nt.masks[2][2][2].item<uint8_t>(), 1);
  EXPECT_TRUE(torch::equal(nt.sem, t.sem));
  // Empty image.
  auto e = make_mask_targets(SampleInstances{}, 32, 32, 4, true);
  EXPECT_EQ(count_ones(e.masks), 0);
  EXPECT_EQ(make_mask_targets(SampleInstances{}, 32, 32, 4, false).masks.size(0), 0);
}

// ---- Letterbox and rect batches ---------------------------------------------------------------------

TEST(Letterbox, PadsWithoutUpscaling) {
  Sample s = make_sample(50, 99, 9);
  s.instances.push_back(1, rect_polygon(10, 5, 20, 15), {10, 5, 20, 15});
  Letterbox lb;
  auto out = letterbox(std::move(s), 64, 128, false, 114, &lb);
  EXPECT_EQ(lb.ratio, 1.0);
  EXPECT_EQ(lb.left, 14);  // dw = 14.5: round(14.4), round(14.6) = 15 on the right
  EXPECT_EQ(lb.top, 7);
  ASSERT_EQ(out.height(), 64);
  ASSERT_EQ(out.width(), 128);
  EXPECT_EQ(out.image[7][14][0].item<uint8_t>(), 9);
  EXPECT_EQ(out.image[7][13][0].item<uint8_t>(), 114);
  EXPECT_EQ(out.image[56][112][0].item<uint8_t>(), 9);
  EXPECT_EQ(out.image[56][113][0].item<uint8_t>(), 114);
  EXPECT_EQ(out.instances.boxes[0], (Box{24, 12, 34, 22}));

  Sample d = make_sample(100, 60, 9);
  d.instances.push_back(1, rect_polygon(10, 50, 20, 100), {10, 50, 20, 100});
  auto o2 = letterbox(std::move(d), 64, 64, false, 114, &lb);
  EXPECT_DOUBLE_EQ(lb.ratio, 0.64);
  EXPECT_EQ(lb.resized_w, 38);
  EXPECT_EQ(lb.left, 13);
  EXPECT_EQ(lb.top, 0);
  EXPECT_NEAR(o2.instances.boxes[0][0], 10 * 0.64 + 13, 1e-5);
  EXPECT_NEAR(o2.instances.boxes[0][3], 64, 1e-5);
}

TEST(Letterbox, RectBatchShapes) {
  auto plan = rect_batches({{480, 640}, {640, 480}, {500, 500}, {300, 600}, {600, 300}}, 2, 64, 32, 0.5);
  EXPECT_EQ(plan.order, (std::vector<int64_t>{3, 0, 2, 1, 4}));
  ASSERT_EQ(plan.shapes.size(), 3u);
  EXPECT_EQ(plan.shapes[0], std::make_pair(64, 96));
  EXPECT_EQ(plan.shapes[1], std::make_pair(96, 96));
  EXPECT_EQ(plan.shapes[2], std::make_pair(96, 64));
}

// ---- HSV -----------------------------------------------------------------------------------------

TEST(Hsv, TablesAndKnownColours) {
  auto imgs = torch::zeros({2, 3, 2, 2}, torch::kUInt8);
  imgs[0].select(0, 0).fill_(255);  // image 0: pure red
  imgs[1].fill_(100);               // image 1: grey
  auto gains = torch::tensor({{1.0f / 6, 0.0f, 0.0f}, {0.3f, 0.5f, 0.5f}});
  auto out = hsv_augment(imgs, gains);
  // Red (H 0) shifted by 30 (60 degrees) -> yellow.
  EXPECT_EQ(out[0][0][0][0].item<uint8_t>(), 255);
  EXPECT_EQ(out[0][1][0][0].item<uint8_t>(), 255);
  EXPECT_EQ(out[0][2][0][0].item<uint8_t>(), 0);
  // Grey keeps S = 0 whatever the hue; V scaled by 1.5 and truncated.
  EXPECT_TRUE(out[1].eq(150).all().item<bool>());
  auto lut = hsv_tables(torch::tensor({{-0.01f, 0.7f, -0.4f}}));
  EXPECT_EQ(lut[0][0][0].item<uint8_t>(), 178);  // (0 - 1.8) mod 180 = 178.2
  EXPECT_EQ(lut[0][1][0].item<uint8_t>(), 0);
  EXPECT_EQ(lut[0][1][200].item<uint8_t>(), 255);
  EXPECT_EQ(lut[0][2][200].item<uint8_t>(), 119);  // 200 (1 + float(-0.4)) = 119.99999: truncated
  // The per-pixel CPU form and the tensor form agree byte for byte (row tails included).
  for (int64_t w : {64, 45}) {
    auto im = torch::randint(0, 256, {2, 3, 5, w}, torch::kUInt8);
    auto g = (torch::rand({2, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
    EXPECT_TRUE(torch::equal(hsv_augment(im, g), hsv_augment_ops(im, g))) << w;
  }
  // Zero gains: the 8-bit round trip changes colours by at most a few levels.
  auto rnd = torch::randint(0, 256, {1, 3, 16, 16}, torch::kUInt8);
  auto same = hsv_augment(rnd, torch::zeros({1, 3}));
  EXPECT_LE((same.to(torch::kInt) - rnd.to(torch::kInt)).abs().to(torch::kFloat).mean().item<float>(), 1.5f);
}

// ---- Loader --------------------------------------------------------------------------------------

namespace {

// Deterministic synthetic prepared samples: sizes and 0-3 polygon instances from the index.
Sample synthetic(int64_t i) {
  SampleRng rng(99, 0, uint64_t(i), Purpose::Test);
  const int h = 40 + int(rng.below(25)), w = 40 + int(rng.below(25));
  Sample s;
  s.image = torch::empty({h, w, 3}, torch::kUInt8);
  auto* p = s.image.data_ptr<uint8_t>();
  for (int k = 0; k < h * w * 3; ++k) p[k] = uint8_t(rng.next_u32());
  s.orig_height = h * 3;
  s.orig_width = w * 3;
  const int n = int(rng.below(4));
  for (int k = 0; k < n; ++k) {
    const float x0 = float(rng.uniform(0, w - 12)), y0 = float(rng.uniform(0, h - 12));
    const float x1 = x0 + float(rng.uniform(4, 12)), y1 = y0 + float(rng.uniform(4, 12));
    s.instances.push_back(int32_t(rng.below(5)), {x0, y0, x1, y0 + 1, x1 - 1, y1, x0 + 2, y1 - 2}, {x0, y0, x1, y1});
  }
  return s;
}

LoaderOptions small_options(int workers) {
  LoaderOptions o;
  o.dataset_size = 10;
  o.imgsz = 64;
  o.batch = 4;
  o.workers = workers;
  o.seed = 7;
  o.pin_memory = 0;
  return o;
}

void expect_same_batch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_TRUE(torch::equal(a.images, b.images));
  EXPECT_TRUE(torch::equal(a.hsv_gains, b.hsv_gains));
  EXPECT_TRUE(torch::equal(a.targets.batch_idx, b.targets.batch_idx));
  EXPECT_TRUE(torch::equal(a.targets.cls, b.targets.cls));
  EXPECT_TRUE(torch::equal(a.targets.bboxes, b.targets.bboxes));
  EXPECT_TRUE(torch::equal(a.targets.masks, b.targets.masks));
  EXPECT_TRUE(torch::equal(a.targets.sem_masks, b.targets.sem_masks));
}

std::vector<Batch> run_epochs(Loader& loader, int epochs) {
  std::vector<Batch> out;
  for (int e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (auto b = loader.next()) out.push_back(std::move(*b));
  }
  return out;
}

}  // namespace

TEST(Loader, SameBytesWithOneOrThreeWorkers) {
  Loader one(synthetic, small_options(1)), three(synthetic, small_options(3)), inline_(synthetic, small_options(0));
  auto a = run_epochs(one, 2), b = run_epochs(three, 2), c = run_epochs(inline_, 2);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  ASSERT_EQ(c.size(), 6u);
  for (size_t k = 0; k < a.size(); ++k) {
    expect_same_batch(a[k], b[k]);
    expect_same_batch(a[k], c[k]);
  }
  // Epochs are shuffled differently.
  EXPECT_NE(a[0].indices, a[3].indices);
}

// Data parallel: part r of 2 of every batch holds the samples, and their bytes, of the whole
// batch's consecutive half (the odd last batch of 2 splits 1 + 1).
// The nice value of each of this process's threads, from /proc (field 19 of each task's stat).
std::vector<int> nice_values_of_threads() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string line;
    std::getline(in, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));  // after the name, from field 3
    std::string f;
    for (int i = 3; i < 19 && fields >> f; ++i) {
    }
    int nice = 0;
    if (fields >> nice) out.push_back(nice);
  }
  return out;
}

TEST(Loader, WorkersRunAtTheNiceValueAskedAndTheConsumerKeepsItsOwn) {
  const int own = lucid::util::thread_nice();
  if (own > 14) GTEST_SKIP() << "this test runs at nice " << own;
  auto o = small_options(3);
  o.worker_nice = 5;
  Loader loader(synthetic, o);
  auto batches = run_epochs(loader, 1);
  EXPECT_EQ(batches.size(), 3u);
  int lowered = 0;
  for (int i = 0; i < 200 && lowered < 3; ++i) {  // each worker sets it as it starts
    const auto values = nice_values_of_threads();
    lowered = static_cast<int>(std::count(values.begin(), values.end(), own + 5));
    if (lowered < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(lowered, 3);
  EXPECT_EQ(lucid::util::thread_nice(), own);
  Loader plain(synthetic, small_options(2));
  run_epochs(plain, 1);
  const auto values = nice_values_of_threads();
  EXPECT_EQ(std::count(values.begin(), values.end(), own + 5), 3) << "workers without worker_nice keep the default";
}

TEST(Loader, ShardsAreConsecutivePartsOfTheSameBatches) {
  Loader whole(synthetic, small_options(2));
  const auto all = run_epochs(whole, 2);
  for (int shard = 0; shard < 2; ++shard) {
    auto o = small_options(2);
    o.shard = shard;
    o.shards = 2;
    Loader part(synthetic, o);
    EXPECT_EQ(part.batches_per_epoch(), whole.batches_per_epoch());
    const auto mine = run_epochs(part, 2);
    ASSERT_EQ(mine.size(), all.size());
    for (size_t k = 0; k < all.size(); ++k) {
      const int64_t n = all[k].images.size(0), from = n * shard / 2, to = n * (shard + 1) / 2;
      std::vector<int64_t> expect(all[k].indices.begin() + from, all[k].indices.begin() + to);
      EXPECT_EQ(mine[k].indices, expect) << k;
      EXPECT_TRUE(torch::equal(mine[k].images, all[k].images.narrow(0, from, to - from))) << k;
      EXPECT_TRUE(torch::equal(mine[k].targets.masks, all[k].targets.masks.narrow(0, from, to - from))) << k;
    }
  }
  auto bad = small_options(1);
  bad.shards = 3;  // batch 4 does not split into 3
  EXPECT_THROW(Loader(synthetic, bad), std::invalid_argument);
}

// Seven workers on batches of four (several workers per batch, samples finishing out of order) and
// a window of one batch give the bytes of the consumer-thread loader.
TEST(Loader, SameBytesWithMoreWorkersThanSamples) {
  auto o = small_options(7);
  o.prefetch = 1;
  Loader many(synthetic, o), inline_(synthetic, small_options(0));
  auto a = run_epochs(many, 2), b = run_epochs(inline_, 2);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t k = 0; k < a.size(); ++k) expect_same_batch(a[k], b[k]);
}

// workers= beyond the CPUs or the batch is capped, as the reference's build_dataloader caps it.
TEST(Loader, WorkersAreCappedAtCpusAndBatch) {
  const int cpus = lucid::util::cpu_count();
  EXPECT_EQ(loader_workers(100000, 16, "test loader"), std::min(cpus, 16));
  EXPECT_EQ(loader_workers(100000, 1, "test loader"), 1);
  EXPECT_EQ(loader_workers(0, 16, "test loader"), 0);
  EXPECT_EQ(loader_workers(1, 16, "test loader"), 1);
}

// Starts a 64-worker loader with the address space limited to a few MiB beyond what is in use,
// too little for the threads' stacks; exits 0 with the UserError's message on stderr.
[[noreturn]] void start_loader_without_room_for_threads() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  const rlim_t limit = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + (rlim_t(4) << 20);
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = limit;
  ::setrlimit(RLIMIT_AS, &lim);
  try {
    Loader loader(synthetic, small_options(64));
    std::fprintf(stderr, "all %d workers started\n", loader.workers());
    std::_Exit(2);
  } catch (const lucid::UserError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(0);
  }
}

// Threads that cannot be started end the constructor with a UserError after the started ones are
// joined; before, the joinable threads left behind ended the process in std::terminate.
TEST(LoaderDeathTest, FailedThreadStartIsAClearError) {
  EXPECT_EXIT(start_loader_without_room_for_threads(), ::testing::ExitedWithCode(0),
              "could start only [0-9]+ of 64 worker threads.*workers=");
}

// augment_sample assembles only the canvas window its warp reads: the result equals the whole
// mosaic canvas warped (scales from 0.5 to 1.5 cover windows smaller than, and as large as, the canvas).
TEST(Augment, MosaicWindowEqualsWholeCanvas) {
  AugmentOptions o;
  o.imgsz = 64;
  o.polygon_points = 50;
  for (int64_t index = 0; index < 24; ++index) {
    const uint64_t seed = 5;
    const Sample got = augment_sample(synthetic, 10, index, o, seed, 2);
    SampleRng mr(seed, 2, index, Purpose::Mosaic), ar(seed, 2, index, Purpose::Perspective),
        fr(seed, 2, index, Purpose::Flip);
    const auto md = draw_mosaic(mr, o.mosaic, o.imgsz, 10);
    const auto ad = draw_affine(ar, o);
    ASSERT_TRUE(md.apply);
    std::array<Sample, 4> tiles{synthetic(index), synthetic(md.others[0]), synthetic(md.others[1]),
                                synthetic(md.others[2])};
    for (auto& t : tiles) resample_polygons(t.instances, o.polygon_points);
    Sample want = mosaic4(std::move(tiles), md.xc, md.yc, o.imgsz);
    want = random_perspective(std::move(want), affine_matrix(ad, 128, 128, 64, 64), ad.scale, 64, 64, false);
    if (fr.uniform() < o.flipud) flip_sample(want, false);
    if (fr.uniform() < o.fliplr) flip_sample(want, true);
    ASSERT_TRUE(torch::equal(got.image, want.image)) << "index " << index;
    ASSERT_EQ(got.instances.boxes, want.instances.boxes) << "index " << index;
  }
}

TEST(Loader, PartialLastBatchAndCoverage) {
  Loader loader(synthetic, small_options(2));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  loader.start_epoch(0);
  std::vector<int64_t> seen;
  std::vector<int64_t> sizes;
  while (auto b = loader.next()) {
    sizes.push_back(b->size());
    EXPECT_EQ(b->images.sizes(), (torch::IntArrayRef{b->size(), 3, 64, 64}));
    EXPECT_EQ(b->targets.masks.sizes(), (torch::IntArrayRef{b->size(), 16, 16}));
    EXPECT_EQ(b->targets.sem_masks.sizes(), (torch::IntArrayRef{b->size(), 16, 16}));
    EXPECT_EQ(b->hsv_gains.sizes(), (torch::IntArrayRef{b->size(), 3}));
    const auto n = b->targets.size();
    EXPECT_EQ(b->targets.bboxes.sizes(), (torch::IntArrayRef{n, 4}));
    if (n) {
      auto bi = b->targets.batch_idx;
      EXPECT_TRUE((bi.slice(0, 1) >= bi.slice(0, 0, n - 1)).all().item<bool>());
      EXPECT_TRUE(((b->targets.bboxes >= 0) & (b->targets.bboxes <= 1)).all().item<bool>());
      // Overlap values stay within each image's instance count.
      for (int64_t i = 0; i < b->size(); ++i) {
        const int64_t count = bi.eq(i).sum().item<int64_t>();
        EXPECT_LE(b->targets.masks[i].max().item<uint8_t>(), count);
      }
    }
    seen.insert(seen.end(), b->indices.begin(), b->indices.end());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
  EXPECT_FALSE(loader.next().has_value());
}

TEST(Loader, CloseMosaicAndErrors) {
  Loader with(synthetic, small_options(2));
  auto o = small_options(2);
  o.mosaic = false;
  Loader without(synthetic, o);
  auto a = run_epochs(with, 1), b = run_epochs(without, 1);
  EXPECT_EQ(a[0].indices, b[0].indices);
  EXPECT_FALSE(torch::equal(a[0].images, b[0].images));
  with.set_mosaic(false);
  auto c = run_epochs(with, 1);
  expect_same_batch(c[0], b[0]);

  auto failing = [](int64_t i) -> Sample {
    if (i == 3) throw std::runtime_error("bad image 3");
    return synthetic(i);
  };
  auto fo = small_options(2);
  fo.shuffle = false;
  Loader bad(failing, fo);
  bad.start_epoch(0);
  EXPECT_THROW(
      {
        while (bad.next()) {
        }
      },
      std::runtime_error);
}

TEST(Loader, ValidationRectBatches) {
  auto o = small_options(2);
  o.augment = false;
  o.rect = true;
  o.batch = 3;
  for (int64_t i = 0; i < o.dataset_size; ++i) {
    auto s = synthetic(i);
    o.image_sizes.emplace_back(s.orig_height, s.orig_width);
  }
  Loader loader(synthetic, o);
  loader.start_epoch(0);
  auto plan = rect_batches(o.image_sizes, 3, 64, 32, 0.5);
  int64_t k = 0;
  size_t pos = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->images.size(2), plan.shapes[k].first);
    EXPECT_EQ(b->images.size(3), plan.shapes[k].second);
    EXPECT_EQ(b->letterbox.size(), size_t(b->size()));
    EXPECT_TRUE(b->hsv_gains.eq(0).all().item<bool>());
    for (auto idx : b->indices) EXPECT_EQ(idx, plan.order[pos++]);
    ++k;
  }
  EXPECT_EQ(k, 4);
}

// ---- Device pixels (the tensor form of the pixel work, here on the CPU) ------------------------------

// render_batch gives augment_sample's image bytes, and plan_sample its instances: mosaic on and off,
// maps without and with rotation and shear (the CPU's separable and per-pixel warps), perspective,
// both flips, and an output width with OpenCV's scalar row tail (60 = 3 * 16 + 12).
TEST(DeviceAugment, RenderEqualsAugmentSample) {
  const int64_t n = 10;
  const DeviceImages images(synthetic, n, torch::kCPU);
  const lucid::test_support::PixelCase cases[] = {{"mosaic", 1, 0, 0, 0, 64},
                                                  {"mosaic rotated", 1, 10, 5, 0, 64},
                                                  {"single", 0, 0, 0, 0, 64},
                                                  {"single rotated", 0, 30, 10, 0, 64},
                                                  {"mosaic perspective", 1, 5, 0, 1e-3, 64},
                                                  {"single perspective", 0, 0, 0, 2e-3, 64},
                                                  {"tail mosaic", 1, 10, 0, 0, 60},
                                                  {"tail single", 0, 0, 0, 0, 60}};
  for (const auto& c : cases) {
    const auto o = c.options(/*polygon_points=*/50);
    std::vector<PixelPlan> plans;
    std::vector<Tensor> want;
    int flips_ud = 0, flips_lr = 0;
    for (int64_t k = 0; k < 24; ++k) {
      PixelPlan plan;
      const Sample planned = plan_sample(synthetic, n, k % n, o, 3, k / n, plan);
      const Sample full = augment_sample(synthetic, n, k % n, o, 3, k / n);
      EXPECT_FALSE(planned.image.defined());
      EXPECT_EQ(planned.instances.boxes, full.instances.boxes) << c.name << " " << k;
      EXPECT_EQ(planned.instances.polygons, full.instances.polygons) << c.name << " " << k;
      EXPECT_EQ(plan.tile_count, c.mosaic ? 4 : 1);
      flips_ud += plan.flip_ud;
      flips_lr += plan.flip_lr;
      plans.push_back(plan);
      want.push_back(full.image.permute({2, 0, 1}));
    }
    EXPECT_GT(flips_ud, 0);
    EXPECT_GT(flips_lr, 0);
    const auto got = render_batch(images, plans);
    ASSERT_EQ(got.sizes(), (torch::IntArrayRef{24, 3, c.imgsz, c.imgsz}));
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(got.ne(torch::stack(want)).sum().item<int64_t>(), 0) << c.name;
  }
}

// The identity map at the image's size, which random_perspective does not warp at all, renders the
// image itself; plans the images cannot satisfy are refused.
TEST(DeviceAugment, IdentityAndBadPlans) {
  auto square = [](int64_t i) {
    Sample s;
    s.image = tagged_image(64, 64, int(i));
    return s;
  };
  const DeviceImages images(square, 3, torch::kCPU);
  AugmentOptions o;
  o.imgsz = 64;
  o.mosaic = 0;
  o.translate = o.scale = 0;
  o.fliplr = 0;
  PixelPlan plan;
  plan_sample(square, 3, 2, o, 1, 0, plan);
  EXPECT_EQ(plan.M, (Matrix3{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_TRUE(torch::equal(render_batch(images, {plan})[0], tagged_image(64, 64, 2).permute({2, 0, 1})));
  auto bad = plan;
  bad.tiles[0].index = 3;
  EXPECT_THROW(render_batch(images, {bad}), std::invalid_argument);
  bad = plan;
  bad.tiles[0].src_x = 1;
  EXPECT_THROW(render_batch(images, {bad}), std::invalid_argument);
  bad = plan;
  bad.out_w = 32;
  EXPECT_THROW(render_batch(images, {plan, bad}), std::invalid_argument);
}

// A loader with device pixels (on the CPU here) hands over the CPU loader's batches byte for byte,
// with any number of workers and after close_mosaic; a store without every image is refused.
TEST(Loader, DevicePixelsSameBytes) {
  const auto images = std::make_shared<const DeviceImages>(synthetic, 10, torch::kCPU);
  for (int workers : {0, 3}) {
    auto o = small_options(workers);
    o.device_images = images;
    Loader device(synthetic, o), cpu(synthetic, small_options(workers));
    auto a = run_epochs(device, 2), b = run_epochs(cpu, 2);
    device.set_mosaic(false);
    cpu.set_mosaic(false);
    for (auto& x : run_epochs(device, 1)) a.push_back(std::move(x));
    for (auto& x : run_epochs(cpu, 1)) b.push_back(std::move(x));
    ASSERT_EQ(a.size(), 9u);
    ASSERT_EQ(b.size(), 9u);
    for (size_t k = 0; k < a.size(); ++k) {
      expect_same_batch(a[k], b[k]);
      EXPECT_EQ(a[k].orig_sizes, b[k].orig_sizes);
      ASSERT_EQ(int64_t(a[k].pixel_plans.size()), a[k].size());
      EXPECT_EQ(a[k].pixel_plans[0].tile_count, k < 6 ? 4 : 1);
      EXPECT_TRUE(b[k].pixel_plans.empty());
    }
  }
  auto o = small_options(0);
  o.device_images = std::make_shared<const DeviceImages>(synthetic, 4, torch::kCPU);
  EXPECT_THROW(Loader(synthetic, o), std::invalid_argument);
}
