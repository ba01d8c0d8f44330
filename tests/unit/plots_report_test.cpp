// Plots, the run report, the confusion matrix, the PR curve data, prediction letterbox and mask
// outlines.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "lucid/metrics/confusion_matrix.h"
#include "lucid/metrics/detection_metrics.h"
#include "lucid/plot/annotate.h"
#include "lucid/plot/canvas.h"
#include "lucid/plot/charts.h"
#include "lucid/predict/predictor.h"
#include "lucid/report/run_report.h"

using namespace lucid;
namespace fs = std::filesystem;

namespace {

torch::Tensor boxes(std::vector<std::array<float, 4>> b) {
  auto t = torch::zeros({static_cast<int64_t>(b.size()), 4});
  for (size_t i = 0; i < b.size(); ++i)
    for (int k = 0; k < 4; ++k) t[static_cast<int64_t>(i)][k] = b[i][k];
  return t;
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("lucid_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(ConfusionMatrix, CountsMatchesMissesAndFalsePositives) {
  metrics::ConfusionMatrix cm(3, /*conf=*/0.25, /*iou=*/0.45);
  // Truths: class 0 at A, class 1 at B, class 2 at C. Detections: class 0 on A (correct), class 2 on
  // B (confused), class 1 far away (false positive), class 0 on C below conf (dropped).
  auto gt = boxes({{0, 0, 10, 10}, {20, 20, 30, 30}, {40, 40, 50, 50}});
  auto det = boxes({{0, 0, 10, 9}, {20, 20, 30, 31}, {70, 70, 80, 80}, {40, 40, 50, 50}});
  cm.add_image(det, torch::tensor({0.9f, 0.8f, 0.7f, 0.1f}), torch::tensor({0.f, 2.f, 1.f, 0.f}), gt,
               torch::tensor({0.f, 1.f, 2.f}));
  EXPECT_EQ(cm.at(0, 0), 1);  // correct
  EXPECT_EQ(cm.at(2, 1), 1);  // predicted 2, truth 1
  EXPECT_EQ(cm.at(1, 3), 1);  // false positive (background column)
  EXPECT_EQ(cm.at(3, 2), 1);  // missed truth (background row)
  double total = 0;
  for (double v : cm.counts()) total += v;
  EXPECT_EQ(total, 4);
  // An image without truths: detections above conf are false positives; without detections: misses.
  cm.add_image(boxes({{0, 0, 5, 5}}), torch::tensor({0.5f}), torch::tensor({2.f}), torch::zeros({0, 4}),
               torch::zeros({0}));
  EXPECT_EQ(cm.at(2, 3), 1);
  cm.add_image(torch::zeros({0, 4}), torch::zeros({0}), torch::zeros({0}), boxes({{0, 0, 5, 5}}), torch::tensor({1.f}));
  EXPECT_EQ(cm.at(3, 1), 1);
  auto n = cm.normalized();
  for (int64_t c = 0; c < 4; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 4; ++r) s += n[r * 4 + c];
    double counts = 0;
    for (int64_t r = 0; r < 4; ++r) counts += cm.at(r, c);
    EXPECT_NEAR(s, counts > 0 ? 1.0 : 0.0, 1e-6) << "column " << c;
  }
}

TEST(ConfusionMatrix, EachTruthAndDetectionMatchedOnceByIou) {
  metrics::ConfusionMatrix cm(1, 0.0, 0.45);
  // Two detections on one truth: the higher-IoU one matches, the other is a false positive.
  cm.add_image(boxes({{0, 0, 10, 8}, {0, 0, 10, 10}}), torch::tensor({0.9f, 0.5f}), torch::tensor({0.f, 0.f}),
               boxes({{0, 0, 10, 10}}), torch::tensor({0.f}));
  EXPECT_EQ(cm.at(0, 0), 1);
  EXPECT_EQ(cm.at(0, 1), 1);
  EXPECT_EQ(cm.at(1, 0), 0);
}

TEST(Curves, PrecisionRecallCurveOfPerfectAndMixedClasses) {
  using V8 = std::vector<uint8_t>;
  V8 tp;
  auto push = [&](bool v) { tp.insert(tp.end(), metrics::kIouThresholds, v ? 1 : 0); };
  // Class 0: two correct predictions. Class 1: a false positive above a correct one.
  push(true), push(true), push(false), push(true);
  auto m = metrics::ap_per_class(tp, {0.9f, 0.8f, 0.7f, 0.6f}, {0, 0, 1, 1}, {0, 0, 1});
  ASSERT_EQ(m.pr_curve.size(), 2u * metrics::kCurvePoints);
  // Class 0: precision 1 at every recall below 1, then the (1, 0) sentinel.
  for (int i = 0; i + 1 < metrics::kCurvePoints; ++i) EXPECT_DOUBLE_EQ(m.pr_curve[i], 1.0) << i;
  EXPECT_DOUBLE_EQ(m.pr_curve[metrics::kCurvePoints - 1], 0.0);
  // Class 1: the envelope's precision 0.5 up to recall 1.
  const double* c1 = m.pr_curve.data() + metrics::kCurvePoints;
  EXPECT_NEAR(c1[1], 0.5, 1e-12);
  EXPECT_NEAR(c1[500], 0.5, 1e-12);
  EXPECT_NEAR(c1[metrics::kCurvePoints - 1], 0.0, 1e-12);  // the (1, 0) sentinel at recall 1
  ASSERT_EQ(m.f1_curve.size(), 2u * metrics::kCurvePoints);
}

TEST(Curves, GaussianFilterKeepsConstantsAndMass) {
  std::vector<double> c(20, 3.5);
  for (double v : plot::gaussian_filter1d(c, 3)) EXPECT_NEAR(v, 3.5, 1e-12);
  std::vector<double> spike(41, 0.0);
  spike[20] = 1.0;
  auto s = plot::gaussian_filter1d(spike, 3);
  double sum = 0;
  for (double v : s) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(s[20], 1.0 / (3 * std::sqrt(2 * M_PI)), 2e-3);  // the normal density's peak
  EXPECT_NEAR(s[17], s[23], 1e-15);
}

TEST(Predict, LetterboxPadsToTheStride) {
  auto a = engine::predict_letterbox(480, 640, 640);
  EXPECT_EQ(a.height, 480);
  EXPECT_EQ(a.width, 640);
  EXPECT_DOUBLE_EQ(a.pad_h, 0);
  auto b = engine::predict_letterbox(500, 375, 640);  // r = 1.28 -> 640 x 480
  EXPECT_EQ(b.height, 640);
  EXPECT_EQ(b.width, 480);
  auto c = engine::predict_letterbox(100, 330, 320);  // r ~ 0.97 -> 97 x 320, padded to 128
  EXPECT_EQ(c.width, 320);
  EXPECT_EQ(c.height, 128);
  EXPECT_DOUBLE_EQ(c.pad_h, 15.5);
  EXPECT_EQ(c.resized_h, 97);
  EXPECT_EQ(c.resized_w, 320);
}

TEST(Predict, MaskOutlineOfSquareRingAndComponents) {
  const int h = 12, w = 16;
  std::vector<uint8_t> m(h * w, 0);
  EXPECT_TRUE(engine::mask_outline(m.data(), h, w).empty());
  for (int y = 2; y <= 6; ++y)
    for (int x = 3; x <= 9; ++x) m[y * w + x] = 1;
  m[10 * w + 14] = 1;  // a smaller second region is ignored
  auto o = engine::mask_outline(m.data(), h, w);
  ASSERT_EQ(o.size(), 8u);  // four corners
  std::set<std::pair<float, float>> corners;
  for (size_t i = 0; i < o.size(); i += 2) corners.insert({o[i], o[i + 1]});
  EXPECT_EQ(corners, (std::set<std::pair<float, float>>{{3, 2}, {9, 2}, {3, 6}, {9, 6}}));
  // A single pixel is its own outline.
  std::vector<uint8_t> one(h * w, 0);
  one[5 * w + 7] = 1;
  EXPECT_EQ(engine::mask_outline(one.data(), h, w), (std::vector<float>{7, 5}));
  // Every outline point lies on the region's border.
  std::mt19937 rng(1);
  std::vector<uint8_t> blob(h * w, 0);
  for (int y = 1; y < h - 1; ++y)
    for (int x = 1; x < w - 1; ++x) blob[y * w + x] = (x - 8) * (x - 8) + (y - 6) * (y - 6) < 20;
  auto ob = engine::mask_outline(blob.data(), h, w);
  ASSERT_GE(ob.size(), 8u);
  for (size_t i = 0; i < ob.size(); i += 2) {
    const int x = static_cast<int>(ob[i]), y = static_cast<int>(ob[i + 1]);
    ASSERT_TRUE(blob[y * w + x]);
    const bool border = !blob[(y - 1) * w + x] || !blob[(y + 1) * w + x] || !blob[y * w + x - 1] ||
                        !blob[y * w + x + 1] || !blob[(y - 1) * w + x - 1] || !blob[(y - 1) * w + x + 1] ||
                        !blob[(y + 1) * w + x - 1] || !blob[(y + 1) * w + x + 1];
    EXPECT_TRUE(border) << x << "," << y;
  }
}

TEST(Plots, DrawnInstancesChangeOnlyTheirPixels) {
  if (!plot::available()) {
    GTEST_SKIP() << "built without cairo";
  }
  data::Image im(60, 80, 3);
  for (auto& p : im.pixels) p = 90;
  plot::Canvas canvas(im);
  auto masks = torch::zeros({1, 60, 80}, torch::kUInt8);
  masks[0].narrow(0, 30, 20).narrow(1, 40, 30).fill_(1);
  plot::Instances inst{boxes({{38, 28, 72, 52}}), torch::tensor({3}), torch::tensor({0.87f}), masks, 1.0, {}};
  plot::DrawStyle style;
  plot::draw_instances(canvas, inst, {"a", "b", "c", "square"}, 0, 0, 1.0, style);
  auto out = canvas.image();
  ASSERT_EQ(out.width, 80);
  ASSERT_EQ(out.height, 60);
  const auto inside = out.at(40, 55);  // in the mask: blended with the class colour
  EXPECT_NE(std::vector<uint8_t>(inside, inside + 3), std::vector<uint8_t>(3, 90));
  const auto c = plot::class_color(3);
  EXPECT_NEAR(inside[0], 0.5 * 90 + 0.5 * c.r * 255, 1.0);
  const auto far = out.at(5, 5);  // outside box and tag
  EXPECT_EQ(std::vector<uint8_t>(far, far + 3), std::vector<uint8_t>(3, 90));
  const auto tag = out.at(20, 45);  // the "square 0.87" tag sits above the box
  EXPECT_NE(std::vector<uint8_t>(tag, tag + 3), std::vector<uint8_t>(3, 90));
}

TEST(Plots, FilesAreValidImagesAndReportLinksExist) {
  if (!plot::available()) {
    GTEST_SKIP() << "built without cairo";
  }
  const auto dir = temp_dir("plots");
  {
    std::ofstream csv(dir / "results.csv");
    csv << "epoch,time,train/box_loss,train/seg_loss,metrics/precision(B),metrics/mAP50(M),val/box_loss,val/"
           "seg_loss,lr/pg0\n";
    for (int e = 1; e <= 5; ++e)
      csv << e << "," << e * 2.5 << "," << 3.0 / e << "," << 2.0 / e << "," << 0.1 * e << "," << 0.05 * e << ","
          << 3.5 / e << "," << 2.5 / e << ",0.01\n";
    std::ofstream args(dir / "args.yaml");
    args << "model: yolo26n-seg.yaml\nepochs: 5\n";
  }
  plot::plot_results((dir / "results.csv").string(), (dir / "results.png").string());
  using V8 = std::vector<uint8_t>;
  V8 tp;
  for (bool v : {true, false, true}) tp.insert(tp.end(), metrics::kIouThresholds, v ? 1 : 0);
  auto m = metrics::ap_per_class(tp, {0.9f, 0.6f, 0.3f}, {0, 1, 1}, {0, 1, 1});
  plot::plot_pr_curve((dir / "BoxPR_curve.png").string(), m, {"circle", "square"});
  plot::plot_confidence_curve((dir / "BoxF1_curve.png").string(), m, {"circle", "square"}, "F1");
  metrics::ConfusionMatrix cm(2);
  cm.add_image(boxes({{0, 0, 10, 10}}), torch::tensor({0.9f}), torch::tensor({1.f}), boxes({{0, 0, 10, 10}}),
               torch::tensor({1.f}));
  plot::plot_confusion_matrix((dir / "confusion_matrix.png").string(), cm, {"circle", "square"}, false);
  auto images = torch::full({3, 3, 32, 48}, 128, torch::kUInt8);
  std::vector<plot::Instances> labels(3);
  labels[1] = {boxes({{4, 4, 20, 20}}), torch::tensor({1}), {}, {}, 1.0, {}};
  plot::plot_image_grid(images, labels, {"a.jpg", "b.jpg", "c.jpg"}, {"circle", "square"},
                        (dir / "val_batch0_labels.jpg").string());
  for (const char* name : {"results.png", "BoxPR_curve.png", "BoxF1_curve.png", "confusion_matrix.png"}) {
    auto info = data::read_image_info((dir / name).string());
    EXPECT_EQ(info.format, data::ImageFormat::Png) << name;
    auto im = data::decode_image((dir / name).string());
    EXPECT_GT(im.width, 200) << name;
  }
  auto grid = data::decode_image((dir / "val_batch0_labels.jpg").string());
  EXPECT_EQ(grid.width, 2 * 48);  // 3 images: a 2 x 2 grid, its empty last row cropped
  EXPECT_EQ(grid.height, 2 * 32);

  report::ReportContent rc;
  rc.title = "test run";
  const auto path = report::write_report(dir.string(), rc);
  std::ifstream in(path);
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::regex link(R"((?:src|href)="([^"]+)\")");
  std::set<std::string> targets;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), link); it != std::sregex_iterator(); ++it)
    targets.insert((*it)[1]);
  for (const char* name :
       {"results.png", "BoxPR_curve.png", "confusion_matrix.png", "val_batch0_labels.jpg", "results.csv", "args.yaml"})
    EXPECT_TRUE(targets.count(name)) << name;
  for (const auto& t : targets) {
    EXPECT_EQ(t.find(':'), std::string::npos) << "not a relative link: " << t;
    EXPECT_TRUE(fs::exists(dir / t)) << t;
  }
  EXPECT_NE(html.find("yolo26n-seg.yaml"), std::string::npos);  // the options table
  EXPECT_NE(html.find("metrics/mAP50(M)"), std::string::npos);  // the results table
  EXPECT_EQ(html.find("BoxP_curve.png"), std::string::npos);    // absent files are not linked
}
