// Prediction on large images: masks at the original resolution come a bounded chunk of detections
// at a time and are kept as windows of the image, without changing a pixel. Batched prediction gives
// each image the result it gets alone.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "data_test_util.h"
#include "lucid/config/model_yaml.h"
#include "lucid/inference/network.h"
#include "lucid/metrics/rle.h"
#include "lucid/model/model.h"
#include "lucid/predict/predictor.h"
#include "lucid/util/error.h"

using namespace lucid;

namespace {

model::SegmentationModel untrained_model() {
  torch::manual_seed(0);
  return model::SegmentationModel(config::load_model_spec("yolo26n-seg.yaml", 2));
}

// Every detection of a random model, whatever its score.
engine::PredictOptions all_detections(int64_t max_det, bool retina) {
  engine::PredictOptions o;
  o.imgsz = 64;
  o.conf = 0.0;
  o.max_det = max_det;
  o.retina_masks = retina;
  return o;
}

// The process's peak resident memory in bytes (VmHWM), and its reset to the current use.
int64_t peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string key;
  int64_t kb = -1;
  while (f >> key) {
    if (key == "VmHWM:") {
      f >> kb;
      break;
    }
    f.ignore(1 << 20, '\n');
  }
  return kb * 1024;
}
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  return bool(f.flush());
}

}  // namespace

TEST(Predictor, MaskChunkSizeDoesNotChangeAPixel) {
  auto model = untrained_model();
  const data::Image image = lucid::testing::pattern(72, 100);
  for (bool retina : {false, true}) {
    auto whole = all_detections(40, retina), single = whole;
    single.mask_chunk_pixels = 1;  // one detection per chunk
    const auto a = engine::predict_image(*model, torch::kCPU, image, whole);
    const auto b = engine::predict_image(*model, torch::kCPU, image, single);
    ASSERT_GT(a.boxes.size(0), 0) << retina;
    ASSERT_EQ(a.masks.size(), static_cast<size_t>(a.boxes.size(0)));
    EXPECT_TRUE(torch::equal(a.boxes, b.boxes));
    EXPECT_TRUE(torch::equal(a.conf, b.conf));
    ASSERT_EQ(a.masks.size(), b.masks.size());
    for (size_t i = 0; i < a.masks.size(); ++i) {
      EXPECT_EQ(a.masks[i].x0, b.masks[i].x0);
      EXPECT_EQ(a.masks[i].y0, b.masks[i].y0);
      EXPECT_TRUE(torch::equal(a.masks[i].pixels, b.masks[i].pixels)) << i;
      // A window is the tight extent of its mask: its first and last rows and columns hold pixels.
      const auto& p = a.masks[i].pixels;
      EXPECT_GT(p[0].sum().item<int64_t>(), 0);
      EXPECT_GT(p[-1].sum().item<int64_t>(), 0);
      EXPECT_GT(p.select(1, 0).sum().item<int64_t>(), 0);
      EXPECT_GT(p.select(1, -1).sum().item<int64_t>(), 0);
    }
  }
}

// 64 detections on a 1500 x 1500 image: masks for all of them at once took 64 x 2.25 M pixels as
// floats (about 0.6 GB, 24 GB for 300 detections on 8000 x 8000); chunk by chunk the peak beyond the
// masks kept stays within a few chunks of one image.
TEST(Predictor, PeakMemoryOnALargeImageIsBounded) {
  auto model = untrained_model();
  const data::Image image = lucid::testing::pattern(1500, 1500);
  for (bool retina : {false, true}) {
    auto o = all_detections(64, retina);
    o.mask_chunk_pixels = int64_t(1) << 22;  // one detection (2.25 M pixels) per chunk
    ASSERT_TRUE(reset_peak_rss());
    const int64_t before = peak_rss();
    const auto p = engine::predict_image(*model, torch::kCPU, image, o);
    const int64_t growth = peak_rss() - before;
    int64_t kept = 0;
    for (const auto& m : p.masks) kept += m.pixels.numel();
    EXPECT_GT(p.masks.size(), 0u);
    EXPECT_LT(growth, kept + (int64_t(80) << 20))
        << "retina " << retina << ": " << p.masks.size() << " masks, " << kept << " bytes kept";
  }
}

// A mask window as a whole h x w image.
torch::Tensor whole_mask(const structures::MaskWindow& m, int h, int w) {
  auto full = torch::zeros({h, w}, torch::kUInt8);
  full.narrow(0, m.y0, m.height()).narrow(1, m.x0, m.width()).copy_(m.pixels);
  return full;
}

// A network whose letterbox is always the full imgsz square (as a fixed-input package's).
class SquareNetwork : public engine::EagerNetwork {
 public:
  using EagerNetwork::EagerNetwork;
  int pad_multiple(int imgsz) const override { return imgsz; }
};

// The reference's batch letterbox at imgsz 128, where an image's minimal letterbox is not the square
// (72 x 100: 96 x 128): a batch of one size is padded minimally, each result the image's alone; a
// batch of mixed sizes puts every image on the full 128 x 128 square, each result the image's alone
// on that square.
TEST(Predictor, BatchLetterboxIsTheReferences) {
  torch::manual_seed(0);
  model::SegmentationModel model(config::load_model_spec("yolo26n-seg.yaml", 2));
  auto o = all_detections(20, false);
  o.imgsz = 128;
  engine::EagerNetwork eager(*model, torch::kCPU, false);
  SquareNetwork square(*model, torch::kCPU, false);
  auto a = lucid::testing::pattern(72, 100), b = a;
  for (auto& px : b.pixels) px = uint8_t(255 - px);
  const std::vector<data::Image> same{a, b}, mixed{a, lucid::testing::pattern(64, 64)};
  EXPECT_EQ(engine::batch_pad_multiple(eager, same, 128), 32);
  EXPECT_EQ(engine::batch_pad_multiple(eager, mixed, 128), 128);
  EXPECT_EQ(engine::predict_letterbox(72, 100, 128, 32).height, 96);
  const auto check = [&](const std::vector<data::Image>& images, engine::Network& alone) {
    const auto batch = engine::predict_images(eager, images, o);
    ASSERT_EQ(batch.size(), images.size());
    for (size_t i = 0; i < images.size(); ++i) {
      const auto one = engine::predict_image(alone, images[i], o);
      ASSERT_GT(one.boxes.size(0), 0);
      ASSERT_EQ(batch[i].boxes.sizes(), one.boxes.sizes()) << i;
      EXPECT_TRUE(torch::allclose(batch[i].boxes, one.boxes, 0, 1e-4)) << i;
      EXPECT_TRUE(torch::allclose(batch[i].conf, one.conf, 0, 1e-5)) << i;
      EXPECT_TRUE(torch::equal(batch[i].cls, one.cls)) << i;
    }
  };
  check(same, eager);
  check(mixed, square);
  // And the two letterboxes do give the first image different results.
  const auto minimal = engine::predict_image(eager, a, o), squared = engine::predict_image(square, a, o);
  EXPECT_FALSE(minimal.boxes.sizes() == squared.boxes.sizes() && torch::allclose(minimal.boxes, squared.boxes));
}

// Images of three sizes, two of them twice with different content, at imgsz 64 (where every one of
// them letterboxes to 64 x 64 either way): the batch's predictions equal the one-by-one predictions (boxes and scores
// to float rounding: a batched forward on the CPU need not round as a single one does; classes and masks), for an
// end-to-end model and an NMS model, with and without retina masks. The untrained NMS model has detections whose mask
// logits lie within rounding of 0 over their whole box, so that rounding flips some of their pixels (432 of 44767
// here): its masks must agree in 98% of their pixels (end-to-end: all of them).
TEST(Predictor, BatchEqualsOneByOne) {
  std::vector<data::Image> images{lucid::testing::pattern(72, 100), lucid::testing::pattern(100, 72),
                                  lucid::testing::pattern(72, 100), lucid::testing::pattern(64, 64),
                                  lucid::testing::pattern(100, 72)};
  for (auto& px : images[2].pixels) px = uint8_t(255 - px);
  for (size_t k = 0; k < images[4].pixels.size(); k += 3) images[4].pixels[k] = uint8_t(images[4].pixels[k] / 2);
  for (const char* yaml : {"yolo26n-seg.yaml", "yolov8n-seg.yaml"}) {
    const bool exact_masks = std::string(yaml) == "yolo26n-seg.yaml";
    torch::manual_seed(0);
    model::SegmentationModel model(config::load_model_spec(yaml, 2));
    for (bool retina : {false, true}) {
      const auto o = all_detections(20, retina);
      const auto batch = engine::predict_images(*model, torch::kCPU, images, o);
      ASSERT_EQ(batch.size(), images.size());
      int64_t differing = 0, covered = 0;
      for (size_t i = 0; i < images.size(); ++i) {
        const int h = images[i].height, w = images[i].width;
        const auto one = engine::predict_image(*model, torch::kCPU, images[i], o);
        const auto& b = batch[i];
        SCOPED_TRACE(std::string(yaml) + " retina " + std::to_string(retina) + " image " + std::to_string(i));
        EXPECT_EQ(b.orig_h, h);
        EXPECT_EQ(b.orig_w, w);
        ASSERT_GT(one.boxes.size(0), 0);
        ASSERT_EQ(b.boxes.sizes(), one.boxes.sizes());
        EXPECT_TRUE(torch::allclose(b.boxes, one.boxes, 0, 1e-4));
        EXPECT_TRUE(torch::allclose(b.conf, one.conf, 0, 1e-5));
        EXPECT_TRUE(torch::equal(b.cls, one.cls));
        ASSERT_EQ(b.masks.size(), one.masks.size());
        for (size_t m = 0; m < b.masks.size(); ++m) {
          const auto x = whole_mask(b.masks[m], h, w), y = whole_mask(one.masks[m], h, w);
          differing += x.ne(y).sum().item<int64_t>();
          covered += x.logical_or(y).sum().item<int64_t>();
          if (exact_masks) {
            EXPECT_EQ(b.masks[m].x0, one.masks[m].x0);
            EXPECT_EQ(b.masks[m].y0, one.masks[m].y0);
            EXPECT_TRUE(torch::equal(b.masks[m].pixels, one.masks[m].pixels)) << m;
          }
        }
      }
      EXPECT_LE(differing, (exact_masks ? 0 : covered / 50))
          << yaml << " retina " << retina << ": " << differing << " of " << covered << " mask pixels differ";
    }
  }
  EXPECT_TRUE(engine::predict_images(*untrained_model(), torch::kCPU, {}, all_detections(5, false)).empty());
}

TEST(Rle, WindowEncodingEqualsTheWholeMask) {
  const uint32_t h = 9, w = 7;
  for (auto [x0, y0, ww, wh] :
       std::vector<std::array<uint32_t, 4>>{{0, 0, 7, 9}, {2, 3, 4, 5}, {6, 8, 1, 1}, {0, 4, 3, 5}}) {
    std::vector<uint8_t> window(size_t(wh) * ww), full(size_t(h) * w, 0);
    for (uint32_t y = 0; y < wh; ++y)
      for (uint32_t x = 0; x < ww; ++x) {
        const uint8_t v = uint8_t((x * 3 + y * 5) % 4 != 0);
        window[y * ww + x] = v;
        full[(y0 + y) * w + x0 + x] = v;
      }
    const auto a = metrics::rle_encode_window(window.data(), wh, ww, x0, y0, h, w);
    const auto b = metrics::rle_encode(full.data(), h, w);
    EXPECT_EQ(a.counts, b.counts) << x0 << "," << y0;
  }
  EXPECT_THROW(metrics::rle_encode_window(nullptr, 2, 2, 6, 0, 9, 7), UserError);
}

// conf=0 with max_det=1000000000 keeps every candidate: their masks are measured against the memory
// available (LUCID_AVAILABLE_MEMORY stands in for the machine) before anything is allocated, and
// refused naming both options; with the machine's memory the same call runs.
TEST(Predictor, MasksBeyondAvailableMemoryAreRefusedBeforeAllocating) {
  auto model = untrained_model();
  const data::Image image = lucid::testing::pattern(72, 100);
  const auto o = all_detections(1000000000, false);
  ::setenv("LUCID_AVAILABLE_MEMORY", "100000", 1);
  std::string message;
  try {
    engine::predict_image(*model, torch::kCPU, image, o);
  } catch (const UserError& e) {
    message = e.what();
  }
  ::unsetenv("LUCID_AVAILABLE_MEMORY");
  for (const char* part : {"conf=0 max_det=1000000000", "bytes for their masks", "100000 bytes are available",
                           "raise conf= or lower max_det="})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  EXPECT_GT(engine::predict_image(*model, torch::kCPU, image, o).boxes.size(0), 0);
}
