// The mix augmentations (copy_paste, mixup, cutmix): their bookkeeping on hand-made samples, their
// random variates, and the pipeline and loader with them on (determinism, close_mosaic, empty images).
#include <gtest/gtest.h>

#include <cmath>

#include "lucid/data/augment.h"
#include "lucid/data/loader.h"
#include "lucid/data/masks.h"
#include "lucid/data/mix.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"

using namespace lucid::data;
using torch::Tensor;

namespace {

std::vector<float> rect_polygon(float x0, float y0, float x1, float y1) { return {x0, y0, x1, y0, x1, y1, x0, y1}; }

// An (h, w, 3) image of one grey level.
Tensor flat(int h, int w, int v) { return torch::full({h, w, 3}, v, torch::kUInt8); }

// An (h, w, 3) image whose pixel (y, x) is (x, y, tag).
Tensor ramp(int h, int w, int tag) {
  auto img = torch::empty({h, w, 3}, torch::kUInt8);
  auto* p = img.data_ptr<uint8_t>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      p[(y * w + x) * 3] = uint8_t(x), p[(y * w + x) * 3 + 1] = uint8_t(y), p[(y * w + x) * 3 + 2] = uint8_t(tag);
  return img;
}

void add_rect(Sample& s, int cls, float x0, float y0, float x1, float y1) {
  s.instances.push_back(cls, rect_polygon(x0, y0, x1, y1), {x0, y0, x1, y1});
}

}  // namespace

TEST(Mix, BoxIoaIsOverTheSecondBox) {
  EXPECT_FLOAT_EQ(box_ioa({0, 0, 10, 10}, {5, 0, 15, 10}), 50.f / (100.f + 1e-7f));
  EXPECT_FLOAT_EQ(box_ioa({0, 0, 10, 10}, {0, 0, 20, 20}), 100.f / (400.f + 1e-7f));
  EXPECT_EQ(box_ioa({0, 0, 10, 10}, {10, 0, 20, 10}), 0.f);  // touching
}

TEST(Mix, CopyPasteSelectionFiltersSortsAndRounds) {
  SampleInstances target, cand;
  target.push_back(0, {}, {0, 0, 10, 10});
  target.push_back(0, {}, {20, 0, 30, 10});
  cand.push_back(1, {}, {0, 0, 10, 10});   // covers target 0: IoA 1
  cand.push_back(1, {}, {50, 0, 60, 10});  // no overlap
  cand.push_back(1, {}, {8, 0, 18, 10});   // 0.2 of target 0
  cand.push_back(1, {}, {28, 0, 38, 10});  // 0.2 of target 1
  cand.push_back(1, {}, {70, 0, 80, 10});  // no overlap
  // Eligible: 1, 2, 3, 4, by largest IoA: 1, 4 (0), 2, 3 (0.2), ties in candidate order.
  EXPECT_EQ(copy_paste_selection(target, cand, 1.0), (std::vector<int64_t>{1, 4, 2, 3}));
  EXPECT_EQ(copy_paste_selection(target, cand, 0.5), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(copy_paste_selection(target, cand, 0.375), (std::vector<int64_t>{1, 4}));  // round(1.5) = 2
  EXPECT_EQ(copy_paste_selection(target, cand, 0.125), (std::vector<int64_t>{}));      // round(0.5) = 0
  EXPECT_EQ(copy_paste_selection(target, cand, 0.0), (std::vector<int64_t>{}));
  // Without target boxes every candidate is eligible.
  EXPECT_EQ(copy_paste_selection(SampleInstances{}, cand, 1.0).size(), 5u);
}

TEST(Mix, CopyPasteFlipPastesMirroredInstances) {
  Sample s;
  s.image = ramp(20, 40, 7);
  add_rect(s, 3, 2, 4, 10, 12);   // left: its mirror (30..38) is free
  add_rect(s, 5, 16, 2, 24, 18);  // centred: its mirror overlaps it fully
  const auto before = s.image.clone();
  copy_paste_flip(s, 1.0);
  ASSERT_EQ(s.instances.size(), 3u);
  EXPECT_EQ(s.instances.cls[2], 3);
  EXPECT_EQ(s.instances.boxes[2], (Box{30, 4, 38, 12}));
  EXPECT_EQ(s.instances.polygons[2], (std::vector<float>{38, 4, 30, 4, 30, 12, 38, 12}));
  // The pasted pixels are the mirrored image's, exactly under the filled polygon (cv2.fillPoly of
  // the truncated vertices: columns 30..38, rows 4..12); everything else is unchanged.
  std::vector<uint8_t> mask(20 * 40, 0);
  fill_polygon(mask.data(), 20, 40, truncate_vertices(s.instances.polygons[2]), 1);
  const auto flipped = before.flip(1);
  int pasted = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 40; ++x) {
      const auto want = mask[y * 40 + x] ? flipped[y][x] : before[y][x];
      ASSERT_TRUE(torch::equal(s.image[y][x], want)) << x << "," << y;
      pasted += mask[y * 40 + x];
    }
  EXPECT_EQ(pasted, 9 * 9);
  EXPECT_EQ(s.image[4][30][0].item<int>(), 9);  // the mirror of column 9

  // No polygons, or no instances: nothing changes (the reference returns early).
  Sample boxes;
  boxes.image = ramp(20, 40, 1);
  boxes.instances.push_back(0, {}, {2, 2, 8, 8});
  copy_paste_flip(boxes, 1.0);
  EXPECT_EQ(boxes.instances.size(), 1u);
  Sample empty;
  empty.image = ramp(20, 40, 1);
  const auto e0 = empty.image.clone();
  copy_paste_flip(empty, 1.0);
  EXPECT_TRUE(empty.instances.empty());
  EXPECT_TRUE(torch::equal(empty.image, e0));
}

TEST(Mix, CopyPastePartnerTakesThePartnersPixelsAndClasses) {
  Sample s, partner;
  s.image = flat(16, 16, 10);
  add_rect(s, 0, 0, 0, 6, 6);
  partner.image = flat(16, 16, 200);
  add_rect(partner, 4, 1, 1, 5, 5);      // on s's instance: IoA 16/36 >= 0.3, not pasted
  add_rect(partner, 7, 10, 10, 14, 14);  // free
  copy_paste_partner(s, partner, 1.0);
  ASSERT_EQ(s.instances.size(), 2u);
  EXPECT_EQ(s.instances.cls[1], 7);
  EXPECT_EQ(s.image[12][12][0].item<int>(), 200);
  EXPECT_EQ(s.image[3][3][0].item<int>(), 10);
  EXPECT_EQ(int(s.image.eq(200).sum().item<int64_t>()), 5 * 5 * 3);
  Sample other;
  other.image = flat(8, 8, 1);
  add_rect(other, 0, 0, 0, 2, 2);
  EXPECT_THROW(copy_paste_partner(s, other, 1.0), std::invalid_argument);  // sizes differ
}

TEST(Mix, MixUpBlendsAndKeepsBothInstanceSets) {
  Sample s, partner;
  s.image = flat(4, 4, 200);
  add_rect(s, 1, 0, 0, 2, 2);
  partner.image = flat(4, 4, 101);
  add_rect(partner, 2, 1, 1, 3, 3);
  add_rect(partner, 3, 0, 1, 3, 3);
  const double r = 0.37;
  mixup(s, partner, r);
  EXPECT_EQ(s.image[0][0][0].item<int>(), int(200 * r + 101 * (1 - r)));  // truncated
  EXPECT_EQ(s.instances.cls, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(partner.instances.size(), 2u);  // the partner is read, not consumed
}

TEST(Mix, CutMixRectAndBookkeeping) {
  EXPECT_EQ(cutmix_rect(100, 50, 0.75, 50, 25), (Rect{25, 13, 75, 37}));  // cut = 0.5: 50 x 25
  EXPECT_EQ(cutmix_rect(100, 50, 0.0, 5, 45), (Rect{0, 20, 55, 50}));     // clipped
  Sample s, partner;
  s.image = flat(40, 40, 10);
  add_rect(s, 0, 0, 0, 10, 10);
  partner.image = flat(40, 40, 90);
  add_rect(partner, 5, 18, 18, 30, 30);  // reaches into the area
  add_rect(partner, 6, 0, 30, 4, 34);    // does not
  const std::array<Rect, 3> areas = {Rect{5, 5, 15, 15}, Rect{20, 20, 35, 35}, Rect{2, 2, 8, 8}};
  Sample a = s;
  a.image = s.image.clone();
  // Only area 1 is free of s's box: the choice is among one.
  int64_t asked = -1;
  EXPECT_TRUE(cutmix(a, partner, areas, [&](int64_t n) {
    asked = n;
    return int64_t(0);
  }));
  EXPECT_EQ(asked, 1);
  ASSERT_EQ(a.instances.size(), 2u);
  EXPECT_EQ(a.instances.cls[1], 5);
  EXPECT_EQ(a.instances.boxes[1], (Box{20, 20, 30, 30}));  // clipped to the area
  for (float v : a.instances.polygons[1]) EXPECT_GE(v, 20.f);
  EXPECT_EQ(int(a.image.eq(90).sum().item<int64_t>()), 15 * 15 * 3);
  EXPECT_EQ(a.image[20][20][0].item<int>(), 90);
  EXPECT_EQ(a.image[35][35][0].item<int>(), 10);
  // Every area on a box, or no partner instance in the area: unchanged.
  Sample b = s;
  EXPECT_FALSE(
      cutmix(b, partner, {Rect{0, 0, 5, 5}, Rect{5, 5, 9, 9}, Rect{2, 2, 20, 20}}, [](int64_t) { return int64_t(0); }));
  EXPECT_FALSE(cutmix(b, partner, {Rect{30, 0, 40, 10}, Rect{30, 0, 40, 10}, Rect{30, 0, 40, 10}},
                      [](int64_t) { return int64_t(0); }));
  EXPECT_EQ(b.instances.size(), 1u);
  EXPECT_TRUE(torch::equal(b.image, s.image));
}

TEST(Mix, BetaVariatesHaveTheirMoments) {
  SampleRng rng(3, 0, 0, Purpose::Test);
  for (auto [a, var] : {std::pair{32.0, 1.0 / (4 * 65)}, {1.0, 1.0 / 12}}) {
    const int n = 20000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      const double x = draw_beta(rng, a, a);
      ASSERT_GT(x, 0.0);
      ASSERT_LT(x, 1.0);
      sum += x, sq += x * x;
    }
    const double mean = sum / n, v = sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.5, 4 * std::sqrt(var / n));
    EXPECT_NEAR(v, var, 0.05 * var);
  }
  EXPECT_THROW(draw_beta(rng, 0.5, 1.0), std::invalid_argument);
}

// ---- Pipeline and loader -------------------------------------------------------------------------

namespace {

// Prepared samples with 0-4 polygon instances (index 0: none), random pixels.
Sample source_sample(int64_t i) {
  SampleRng rng(41, 0, uint64_t(i), Purpose::Test);
  const int h = 48 + int(rng.below(17)), w = 48 + int(rng.below(17));
  Sample s;
  s.image = torch::empty({h, w, 3}, torch::kUInt8);
  auto* p = s.image.data_ptr<uint8_t>();
  for (int k = 0; k < h * w * 3; ++k) p[k] = uint8_t(rng.next_u32());
  s.orig_height = h;
  s.orig_width = w;
  const int n = i == 0 ? 0 : int(rng.below(5));
  for (int k = 0; k < n; ++k) {
    const float x0 = float(rng.uniform(0, w - 14)), y0 = float(rng.uniform(0, h - 14));
    const float x1 = x0 + float(rng.uniform(5, 14)), y1 = y0 + float(rng.uniform(5, 14));
    s.instances.push_back(int32_t(rng.below(4)), {x0, y0, x1, y0 + 1, x1 - 1, y1, x0 + 2, y1 - 2}, {x0, y0, x1, y1});
  }
  return s;
}

AugmentOptions mix_options(double mixup, double cutmix, double copy_paste, CopyPasteMode mode) {
  AugmentOptions o;
  o.imgsz = 64;
  o.mixup = mixup;
  o.cutmix = cutmix;
  o.copy_paste = copy_paste;
  o.copy_paste_mode = mode;
  return o;
}

void expect_same_sample(const Sample& a, const Sample& b) {
  ASSERT_TRUE(torch::equal(a.image, b.image));
  EXPECT_EQ(a.instances.cls, b.instances.cls);
  EXPECT_EQ(a.instances.boxes, b.instances.boxes);
  EXPECT_EQ(a.instances.polygons, b.instances.polygons);
}

LoaderOptions loader_options(int workers, const AugmentOptions& aug) {
  LoaderOptions o;
  o.dataset_size = 12;
  o.imgsz = 64;
  o.batch = 4;
  o.workers = workers;
  o.seed = 5;
  o.pin_memory = 0;
  o.aug = aug;
  return o;
}

}  // namespace

TEST(MixPipeline, DeterministicAndEachAugmentationActs) {
  const int64_t n = 12;
  const AugmentOptions plain = mix_options(0, 0, 0, CopyPasteMode::Flip);
  for (const auto& o : {mix_options(1, 0, 0, CopyPasteMode::Flip), mix_options(0, 1, 0, CopyPasteMode::Flip),
                        mix_options(0, 0, 1, CopyPasteMode::Flip), mix_options(0, 0, 1, CopyPasteMode::MixUp),
                        mix_options(0.5, 0.5, 0.5, CopyPasteMode::MixUp)}) {
    int changed = 0, more = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::array<float, 3> g1{}, g2{}, g0{};
      const auto a = augment_sample(source_sample, n, i, o, 9, 2, &g1);
      const auto b = augment_sample(source_sample, n, i, o, 9, 2, &g2);
      expect_same_sample(a, b);
      EXPECT_EQ(g1, g2);
      ASSERT_EQ(a.height(), 64);
      ASSERT_EQ(a.width(), 64);
      ASSERT_EQ(a.instances.polygons.size(), a.instances.size());
      const auto base = augment_sample(source_sample, n, i, plain, 9, 2, &g0);
      EXPECT_EQ(g0, g1);  // the HSV stream does not depend on the mix options
      changed += !torch::equal(a.image, base.image);
      more += a.instances.size() > base.instances.size();
      // The sample's own instances come first, unchanged by the mix steps after the warp.
      if (o.copy_paste == 0 || o.copy_paste_mode == CopyPasteMode::MixUp) {
        for (size_t k = 0; k < base.instances.size(); ++k) ASSERT_EQ(a.instances.boxes[k], base.instances.boxes[k]);
      }
    }
    EXPECT_GT(changed, 0);
    EXPECT_GT(more, 0);
  }
  // A mix option that never applies leaves every byte of the mix-free pipeline.
  const auto never = mix_options(1e-300, 1e-300, 0, CopyPasteMode::Flip);
  for (int64_t i = 0; i < n; ++i)
    expect_same_sample(augment_sample(source_sample, n, i, never, 9, 2),
                       augment_sample(source_sample, n, i, plain, 9, 2));
  // Another epoch or seed draws other partners.
  const auto o = mix_options(1, 1, 1, CopyPasteMode::MixUp);
  int differ = 0;
  for (int64_t i = 1; i < n; ++i)
    differ += !torch::equal(augment_sample(source_sample, n, i, o, 9, 2).image,
                            augment_sample(source_sample, n, i, o, 9, 3).image);
  EXPECT_GT(differ, n / 2);
}

TEST(MixPipeline, EmptyImagesAndNoMosaic) {
  // Every image without instances: copy_paste has nothing to paste, mixup and cutmix still act on the pixels.
  auto empty_source = [](int64_t i) {
    Sample s = source_sample(i);
    s.instances.clear();
    return s;
  };
  for (auto mode : {CopyPasteMode::Flip, CopyPasteMode::MixUp}) {
    auto o = mix_options(1, 1, 1, mode);
    for (double mosaic : {1.0, 0.0}) {
      o.mosaic = mosaic;
      for (int64_t i = 0; i < 6; ++i) {
        const auto s = augment_sample(empty_source, 6, i, o, 1, 0);
        EXPECT_TRUE(s.instances.empty());
        EXPECT_EQ(s.height(), 64);
      }
    }
  }
}

TEST(MixPipeline, LoaderSameBytesAnyWorkersAndCloseMosaic) {
  const auto aug = mix_options(0.5, 0.5, 0.7, CopyPasteMode::MixUp);
  Loader one(source_sample, loader_options(1, aug)), three(source_sample, loader_options(3, aug));
  for (int e = 0; e < 2; ++e) {
    one.start_epoch(e);
    three.start_epoch(e);
    while (auto a = one.next()) {
      auto b = three.next();
      ASSERT_TRUE(b);
      EXPECT_TRUE(torch::equal(a->images, b->images));
      EXPECT_TRUE(torch::equal(a->targets.bboxes, b->targets.bboxes));
      EXPECT_TRUE(torch::equal(a->targets.masks, b->targets.masks));
      // Overlap map: one value per instance of each image, none beyond.
      for (int64_t j = 0; j < a->size(); ++j) {
        const int64_t count = a->targets.batch_idx.eq(j).sum().item<int64_t>();
        EXPECT_LE(a->targets.masks[j].max().item<int64_t>(), count);
      }
    }
  }
  // close_mosaic turns the mix augmentations off with mosaic: the batches of a mix-free loader with
  // mosaic off.
  auto plain_opts = loader_options(2, mix_options(0, 0, 0, CopyPasteMode::Flip));
  plain_opts.mosaic = false;
  Loader plain(source_sample, plain_opts);
  one.set_mosaic(false);
  one.start_epoch(4);
  plain.start_epoch(4);
  while (auto a = one.next()) {
    auto b = plain.next();
    ASSERT_TRUE(b);
    EXPECT_TRUE(torch::equal(a->images, b->images));
    EXPECT_TRUE(torch::equal(a->targets.bboxes, b->targets.bboxes));
  }
}

TEST(MixPipeline, NoPixelPlanForMixes) {
  PixelPlan plan;
  EXPECT_THROW(plan_sample(source_sample, 12, 1, mix_options(0, 1, 0, CopyPasteMode::Flip), 0, 0, plan),
               std::invalid_argument);
}

TEST(MixOptions, DefaultsValuesAndGpuAugment) {
  auto settings = [](std::vector<std::string> tokens) {
    auto o = lucid::engine::train_options();
    o.parse(tokens);
    return lucid::engine::TrainSettings::from(o);
  };
  const auto d = settings({});
  EXPECT_EQ(d.loader.aug.mixup, 0.0);
  EXPECT_EQ(d.loader.aug.cutmix, 0.0);
  EXPECT_EQ(d.loader.aug.copy_paste, 0.0);
  EXPECT_EQ(d.copy_paste_mode, "flip");
  EXPECT_EQ(d.loader.aug.copy_paste_mode, CopyPasteMode::Flip);
  const auto m = settings({"copy_paste=0.5", "copy_paste_mode=mixup"});
  EXPECT_EQ(m.copy_paste_mode, "mixup");
  EXPECT_EQ(m.loader.aug.copy_paste_mode, CopyPasteMode::MixUp);
  auto message = [&](std::vector<std::string> tokens) {
    try {
      settings(tokens);
    } catch (const lucid::UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({"mixup=1.5"}).find("mixup"), std::string::npos);
  EXPECT_NE(message({"cutmix=-0.1"}).find("cutmix"), std::string::npos);
  EXPECT_NE(message({"copy_paste_mode=copy"}).find("copy_paste_mode"), std::string::npos);
  const auto gpu = message({"gpu_augment=True", "cutmix=0.3"});
  EXPECT_NE(gpu.find("gpu_augment"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("cutmix=0.3"), std::string::npos) << gpu;
  EXPECT_EQ(message({"gpu_augment=True", "mosaic=0.5"}), "");
}
