// The public inference API (lucid/lucid.h): a Model read from a weights file predicts what the
// engine's predictor predicts on the same image, from a file or from pixels (RGB, RGBA, padded
// rows), alone or in a batch; masks are windows that expand to the whole image; bad buffers and
// options are errors naming them; draw writes the annotated image.
#include <gtest/gtest.h>

#include <fstream>

#include "data_test_util.h"
#include "lucid/config/model_yaml.h"
#include "lucid/lucid.h"
#include "lucid/plot/canvas.h"
#include "lucid/predict/predictor.h"
#include "lucid/weights/model_source.h"

using namespace lucid;

namespace {

// An untrained two-class model's FP32 weights with class names and imgsz 64.
std::string weights_file(const lucid::testing::TempDir& dir, const std::vector<std::string>& names) {
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 2));
  const auto path = dir.str("w.safetensors");
  engine::write_weights_file(path, *m, names, 64, /*half=*/false);
  return path;
}

// Every detection, whatever its score.
PredictOptions everything() {
  PredictOptions o;
  o.conf = 0;
  o.max_det = 20;
  return o;
}

// The result equals the engine's prediction: exactly, or with boxes and scores to float rounding
// (`rounding`: a batched forward on the CPU need not round as a single one does).
void expect_same(const Result& r, const engine::Prediction& p, const std::vector<std::string>& names,
                 bool rounding = false) {
  const float box_tol = rounding ? 1e-4f : 0.0f, score_tol = rounding ? 1e-5f : 0.0f;
  ASSERT_EQ(r.width, p.orig_w);
  ASSERT_EQ(r.height, p.orig_h);
  ASSERT_EQ(static_cast<int64_t>(r.detections.size()), p.boxes.size(0));
  for (size_t i = 0; i < r.detections.size(); ++i) {
    const auto& d = r.detections[i];
    const auto b = p.boxes[static_cast<int64_t>(i)];
    EXPECT_NEAR(d.x1, b[0].item<float>(), box_tol);
    EXPECT_NEAR(d.y1, b[1].item<float>(), box_tol);
    EXPECT_NEAR(d.x2, b[2].item<float>(), box_tol);
    EXPECT_NEAR(d.y2, b[3].item<float>(), box_tol);
    EXPECT_NEAR(d.score, p.conf[static_cast<int64_t>(i)].item<float>(), score_tol);
    EXPECT_EQ(d.class_id, p.cls[static_cast<int64_t>(i)].item<int64_t>());
    EXPECT_EQ(d.class_name, names[static_cast<size_t>(d.class_id)]);
    const auto& w = p.masks[i];
    EXPECT_EQ(d.mask.x0, w.x0);
    EXPECT_EQ(d.mask.y0, w.y0);
    ASSERT_EQ(d.mask.width, w.width());
    ASSERT_EQ(d.mask.height, w.height());
    EXPECT_TRUE(std::equal(d.mask.pixels.begin(), d.mask.pixels.end(), w.pixels.data_ptr<uint8_t>()));
  }
}

}  // namespace

TEST(LucidApi, PredictsAsTheEngineFromFilesAndBuffers) {
  lucid::testing::TempDir dir;
  const std::vector<std::string> names{"circle", "square"};
  const auto weights = weights_file(dir, names);
  lucid::Model model(weights, "cpu");
  EXPECT_EQ(model.names(), names);
  EXPECT_EQ(model.trained_imgsz(), 64);
  EXPECT_EQ(model.device(), "cpu");

  auto engine_model = engine::load_inference_model("model", weights, torch::kCPU);
  engine::PredictOptions eo;
  eo.imgsz = 64;  // the file's
  eo.conf = 0;
  eo.max_det = 20;
  const data::Image image = lucid::testing::pattern(72, 100);
  const auto expected = engine::predict_image(*engine_model.model, torch::kCPU, image, eo);
  ASSERT_GT(expected.boxes.size(0), 0);

  const ImageView rgb{image.pixels.data(), image.width, image.height};
  expect_same(model.predict(rgb, everything()), expected, names);

  // The same pixels as RGBA with padded rows.
  const size_t stride = size_t(image.width) * 4 + 12;
  std::vector<uint8_t> rgba(stride * image.height, 7);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      std::copy(image.at(y, x), image.at(y, x) + 3, rgba.data() + y * stride + x * 4);
      rgba[y * stride + x * 4 + 3] = uint8_t(x);
    }
  expect_same(model.predict(ImageView{rgba.data(), image.width, image.height, 4, stride}, everything()), expected,
              names);

  // From a PNG file (lossless: the same pixels).
  const auto png = dir.str("a.png");
  data::write_file(png, data::encode_png(image));
  expect_same(model.predict(png, everything()), expected, names);

  // A batch with an image of another size in the middle: the engine's batch of the same images
  // (each letterboxed to the full square, as the reference letterboxes a batch of mixed sizes).
  const data::Image other = lucid::testing::pattern(100, 72);
  const std::vector<data::Image> mixed{image, other, image};
  const auto expected_mixed = engine::predict_images(*engine_model.model, torch::kCPU, mixed, eo);
  const auto batch =
      model.predict_batch({rgb, ImageView{other.pixels.data(), other.width, other.height}, rgb}, everything());
  ASSERT_EQ(batch.size(), 3u);
  for (size_t k = 0; k < 3; ++k) expect_same(batch[k], expected_mixed[k], names, true);
  const auto files = model.predict_batch(std::vector<std::string>{png, png}, everything());
  ASSERT_EQ(files.size(), 2u);
  expect_same(files[1], expected, names, true);

  // conf keeps what the engine keeps.
  PredictOptions some = everything();
  some.conf = expected.conf.median().item<float>();
  eo.conf = some.conf;
  expect_same(model.predict(rgb, some), engine::predict_image(*engine_model.model, torch::kCPU, image, eo), names);
}

TEST(LucidApi, MaskWindowExpandsToTheImage) {
  Mask m;
  m.x0 = 2;
  m.y0 = 1;
  m.width = 3;
  m.height = 2;
  m.pixels = {1, 0, 1, 0, 1, 1};
  EXPECT_EQ(m.area(), 4);
  const auto full = m.full(6, 4);
  ASSERT_EQ(full.size(), 24u);
  int64_t inside = 0;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) {
      EXPECT_EQ(full[size_t(y) * 6 + x] != 0, m.contains(x, y)) << x << "," << y;
      inside += full[size_t(y) * 6 + x];
    }
  EXPECT_EQ(inside, 4);
  EXPECT_TRUE(m.contains(2, 1));
  EXPECT_FALSE(m.contains(3, 1));
  EXPECT_TRUE(m.contains(4, 2));
  EXPECT_FALSE(m.contains(5, 2));
  EXPECT_FALSE(m.contains(-1, -1));
}

TEST(LucidApi, BadInputIsAnErrorNamingIt) {
  lucid::testing::TempDir dir;
  const auto weights = weights_file(dir, {});
  lucid::Model model(weights, "cpu");
  EXPECT_EQ(model.names(), (std::vector<std::string>{"class0", "class1"}));
  const data::Image image = lucid::testing::pattern(8, 8);
  using lucid::testing::expect_user_error;
  expect_user_error([&] { lucid::Model(dir.str("nope.safetensors"), "cpu"); }, {"nope.safetensors"});
  expect_user_error([&] { model.predict(dir.str("nope.jpg")); }, {"nope.jpg"});
  expect_user_error([&] { model.predict(ImageView{nullptr, 8, 8}); }, {"ImageView", "null"});
  expect_user_error([&] { model.predict(ImageView{image.pixels.data(), 0, 8}); }, {"ImageView", "0x8"});
  expect_user_error([&] { model.predict(ImageView{image.pixels.data(), 8, 8, 2}); }, {"channels=2"});
  expect_user_error([&] { model.predict(ImageView{image.pixels.data(), 8, 8, 3, 10}); }, {"stride 10"});
  expect_user_error([&] { model.predict(ImageView{image.pixels.data(), 1 << 15, 1 << 15}); }, {"larger than"});
  const ImageView view{image.pixels.data(), 8, 8};
  auto with = [&](auto set) {
    PredictOptions o;
    set(o);
    return o;
  };
  expect_user_error([&] { model.predict(view, with([](PredictOptions& o) { o.imgsz = 50; })); }, {"imgsz=50"});
  expect_user_error([&] { model.predict(view, with([](PredictOptions& o) { o.conf = 2; })); }, {"conf="});
  expect_user_error([&] { model.predict(view, with([](PredictOptions& o) { o.iou = -1; })); }, {"iou="});
  expect_user_error([&] { model.predict(view, with([](PredictOptions& o) { o.max_det = 0; })); }, {"max_det=0"});
  expect_user_error([&] { model.predict(view, with([](PredictOptions& o) { o.classes = {2}; })); }, {"class 2"});
  Result wrong;
  wrong.width = 9;
  wrong.height = 8;
  if (plot::available()) expect_user_error([&] { model.draw(view, wrong, dir.str("x.png")); }, {"x.png", "9x8"});
}

TEST(LucidApi, DrawWritesTheAnnotatedImage) {
  if (!plot::available()) {
    GTEST_SKIP() << "built without cairo";
  }
  lucid::testing::TempDir dir;
  lucid::Model model(weights_file(dir, {"circle", "square"}), "cpu");
  const data::Image image = lucid::testing::pattern(72, 100);
  const ImageView view{image.pixels.data(), image.width, image.height};
  PredictOptions o = everything();
  o.max_det = 3;
  const auto r = model.predict(view, o);
  ASSERT_FALSE(r.detections.empty());
  const auto out = dir.str("drawn.png");
  model.draw(view, r, out);
  const auto drawn = data::decode_image(out);
  ASSERT_EQ(drawn.width, image.width);
  ASSERT_EQ(drawn.height, image.height);
  // Inside the first mask the translucent fill changes the pixels.
  const auto& m = r.detections[0].mask;
  int changed = 0;
  for (int y = m.y0; y < m.y0 + m.height; ++y)
    for (int x = m.x0; x < m.x0 + m.width; ++x)
      if (m.contains(x, y) && !std::equal(image.at(y, x), image.at(y, x) + 3, drawn.at(y, x))) ++changed;
  EXPECT_GT(changed, m.area() / 2);
}
