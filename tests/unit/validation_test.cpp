// Validation: NMS, end-to-end selection, mask processing, matching, AP, and a validator run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lucid/config/model_yaml.h"
#include "lucid/evaluate/validator.h"
#include "lucid/inference/postprocess.h"
#include "lucid/metrics/detection_metrics.h"
#include "lucid/model/model.h"

using namespace lucid;
using torch::Tensor;

namespace {

Tensor boxes_of(const std::vector<std::array<float, 4>>& b) {
  auto t = torch::zeros({static_cast<int64_t>(b.size()), 4});
  for (size_t i = 0; i < b.size(); ++i)
    for (int k = 0; k < 4; ++k) t[i][k] = b[i][k];
  return t;
}

std::vector<int64_t> ints(const Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Greedy NMS from first principles (double precision IoU), for comparison.
std::vector<int64_t> brute_nms(const Tensor& boxes, const Tensor& scores, double thr) {
  const int64_t n = boxes.size(0);
  auto order = ints(std::get<1>(scores.sort(true, 0, true)));
  auto b = boxes.accessor<float, 2>();
  std::vector<char> removed(n, 0);
  std::vector<int64_t> keep;
  for (int64_t a = 0; a < n; ++a) {
    const auto i = order[a];
    if (removed[i]) continue;
    keep.push_back(i);
    const float ai = (b[i][2] - b[i][0]) * (b[i][3] - b[i][1]);
    for (int64_t c = a + 1; c < n; ++c) {
      const auto j = order[c];
      const float w = std::max(0.0f, std::min(b[i][2], b[j][2]) - std::max(b[i][0], b[j][0]));
      const float h = std::max(0.0f, std::min(b[i][3], b[j][3]) - std::max(b[i][1], b[j][1]));
      const float inter = w * h;
      const float aj = (b[j][2] - b[j][0]) * (b[j][3] - b[j][1]);
      if (inter / (ai + aj - inter) > thr) removed[j] = 1;
    }
  }
  return keep;
}

// Raw one-to-many style predictions (1, 4 + nc + extra, A) from rows [cx cy w h scores... extra...].
Tensor raw_predictions(const std::vector<std::vector<float>>& anchors) {
  const int64_t a = static_cast<int64_t>(anchors.size()), c = static_cast<int64_t>(anchors[0].size());
  auto t = torch::zeros({a, c});
  for (int64_t i = 0; i < a; ++i)
    for (int64_t k = 0; k < c; ++k) t[i][k] = anchors[i][k];
  return t.t().unsqueeze(0).contiguous();
}

}  // namespace

// ----------------------------------------------------------------------------------------- NMS

TEST(Nms, HandCase) {
  auto boxes = boxes_of({{0, 0, 10, 10}, {1, 1, 11, 11}, {0, 0, 10, 9.5}, {50, 50, 60, 60}});
  auto scores = torch::tensor({0.9f, 0.8f, 0.7f, 0.95f});
  // IoU(0, 1) = 81 / 119 < 0.7 keeps 1; IoU(0, 2) = 0.95 removes 2.
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.7)), (std::vector<int64_t>{3, 0, 1}));
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.6)), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.7, 2)), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(engine::nms(torch::zeros({0, 4}), torch::zeros({0}), 0.7).numel(), 0);
}

TEST(Nms, SuppressesOnlyAboveThreshold) {
  auto boxes = boxes_of({{0, 0, 4, 1}, {0, 0, 2, 1}});  // IoU exactly 0.5
  auto scores = torch::tensor({0.9f, 0.8f});
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.5)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.49)), (std::vector<int64_t>{0}));
  // Equal scores keep their input order.
  auto far = boxes_of({{0, 0, 1, 1}, {5, 5, 6, 6}, {9, 9, 10, 10}});
  EXPECT_EQ(ints(engine::nms(far, torch::tensor({0.5f, 0.5f, 0.5f}), 0.5)), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Nms, ManyBoxesAcrossChunksMatchGreedy) {
  torch::manual_seed(0);
  const int64_t n = 3000;  // several chunks of rows on the CPU
  auto xy = torch::rand({n, 2}) * 200;
  auto wh = torch::rand({n, 2}) * 40 + 1;
  auto boxes = torch::cat({xy, xy + wh}, 1);
  auto scores = torch::rand({n});
  auto expected = brute_nms(boxes, scores, 0.5);
  EXPECT_EQ(ints(engine::nms(boxes, scores, 0.5)), expected);
  auto first = ints(engine::nms(boxes, scores, 0.5, 100));
  ASSERT_EQ(first.size(), 100u);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), expected.begin()));
}

TEST(NonMaxSuppression, MultiLabelRowsClassOffsetAndAgnostic) {
  // Anchors: [cx cy w h | s0 s1 | extra]. Anchor 0 and 1 overlap heavily (IoU 0.81).
  auto pred = raw_predictions({{10, 10, 10, 10, 0.9f, 0.6f, 7},
                               {10.5f, 10.5f, 10, 10, 0.0f, 0.8f, 8},
                               {50, 50, 4, 4, 0.0005f, 0.0009f, 9},  // below conf: not a candidate
                               {80, 80, 4, 4, 0.3f, 0.0f, 10}});
  engine::NmsOptions o;
  o.conf = 0.001;
  o.nc = 2;
  auto out = engine::non_max_suppression(pred, o)[0];
  // Multi-label rows: (0, c0) 0.9, (0, c1) 0.6, (1, c1) 0.8, (3, c0) 0.3. Class 1: anchor 1 (0.8)
  // suppresses anchor 0's class-1 row (IoU 0.81 > 0.7).
  ASSERT_EQ(out.size(0), 3);
  ASSERT_EQ(out.size(1), 7);
  EXPECT_FLOAT_EQ(out[0][4].item<float>(), 0.9f);
  EXPECT_EQ(out[0][5].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(out[1][4].item<float>(), 0.8f);
  EXPECT_EQ(out[1][5].item<float>(), 1.0f);
  EXPECT_EQ(out[1][6].item<float>(), 8.0f);  // extra columns travel with their anchor
  EXPECT_FLOAT_EQ(out[2][4].item<float>(), 0.3f);
  // xywh -> xyxy
  EXPECT_FLOAT_EQ(out[0][0].item<float>(), 5.0f);
  EXPECT_FLOAT_EQ(out[0][3].item<float>(), 15.0f);

  o.agnostic = true;  // no class offset: anchor 0 (0.9) suppresses anchor 1 in every class
  auto agn = engine::non_max_suppression(pred, o)[0];
  ASSERT_EQ(agn.size(0), 2);
  EXPECT_FLOAT_EQ(agn[0][4].item<float>(), 0.9f);
  EXPECT_FLOAT_EQ(agn[1][4].item<float>(), 0.3f);

  o.agnostic = false;
  o.multi_label = false;  // best class per anchor: (0, c0) 0.9, (1, c1) 0.8, (3, c0) 0.3
  EXPECT_EQ(engine::non_max_suppression(pred, o)[0].size(0), 3);
  o.multi_label = true;
  o.max_det = 2;
  EXPECT_EQ(engine::non_max_suppression(pred, o)[0].size(0), 2);
  o.max_det = 300;
  o.classes = {1};
  auto only1 = engine::non_max_suppression(pred, o)[0];
  ASSERT_EQ(only1.size(0), 1);
  EXPECT_EQ(only1[0][5].item<float>(), 1.0f);
}

TEST(NonMaxSuppression, ClassOffsetIsPerClassId) {
  // Without the 7680-pixel class offset the two identical boxes would suppress each other.
  auto pred = raw_predictions({{100, 100, 50, 50, 0.9f, 0.0f, 0.0f}, {100, 100, 50, 50, 0.0f, 0.0f, 0.8f}});
  engine::NmsOptions o;
  o.nc = 3;
  EXPECT_EQ(engine::non_max_suppression(pred, o)[0].size(0), 2);
  o.max_wh = 0;
  EXPECT_EQ(engine::non_max_suppression(pred, o)[0].size(0), 1);
  // Empty image and max_nms cut.
  auto none = raw_predictions({{1, 1, 1, 1, 0.0f, 0.0f, 0.0f}});
  EXPECT_EQ(engine::non_max_suppression(none, o)[0].sizes(), (std::vector<int64_t>{0, 6}));
  o.max_wh = 7680;
  o.max_nms = 1;
  auto cut = engine::non_max_suppression(pred, o)[0];
  ASSERT_EQ(cut.size(0), 1);
  EXPECT_FLOAT_EQ(cut[0][4].item<float>(), 0.9f);
}

TEST(EndToEnd, SelectKeepsScoresAboveConf) {
  auto rows = torch::zeros({2, 4, 8});
  rows[0].select(1, 4).copy_(torch::tensor({0.9f, 0.5f, 0.001f, 0.0005f}));
  rows[0].select(1, 5).copy_(torch::tensor({1.0f, 0.0f, 1.0f, 0.0f}));
  rows[1].select(1, 4).copy_(torch::tensor({0.0f, 0.0f, 0.0f, 0.0f}));
  auto out = engine::select_end2end(rows, 0.001);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].size(0), 2);  // 0.001 itself is not > conf
  EXPECT_EQ(out[1].size(0), 0);
  EXPECT_EQ(engine::select_end2end(rows, 0.001, 1)[0].size(0), 1);
  auto cls1 = engine::select_end2end(rows, 0.0001, 300, {1})[0];
  EXPECT_EQ(cls1.size(0), 2);
}

TEST(EndToEnd, TopKDecodeTakesBestAnchorClassPairs) {
  // A one-to-one head with reg_max 1 on a 16x16 input: 2x2 + 1 + 1 = 6 anchors, 3 classes.
  model::SegmentHeadOptions ho;
  ho.nc = 3, ho.nm = 2, ho.npr = 4, ho.reg_max = 1, ho.end2end = true, ho.ch = {4, 4, 4};
  model::SegmentHead head(ho);
  model::HeadOutputs out;
  out.feats = {torch::zeros({1, 4, 2, 2}), torch::zeros({1, 4, 1, 1}), torch::zeros({1, 4, 1, 1})};
  model::BranchOutputs b;
  b.boxes = torch::ones({1, 4, 6});  // 1 grid unit each side
  auto p = torch::full({1, 3, 6}, 0.01).logit();
  p[0][2][1] = std::log(0.9 / 0.1);  // anchor 1 class 2: 0.9
  p[0][0][1] = std::log(0.8 / 0.2);  // anchor 1 class 0: 0.8
  p[0][1][4] = std::log(0.7 / 0.3);  // anchor 4 (P4) class 1: 0.7
  b.scores = p;
  b.mask_coefficient = torch::arange(12, torch::kFloat).view({1, 2, 6});
  b.proto = torch::zeros({1, 2, 4, 4});
  out.one2many = b;
  out.one2one = b;
  const std::vector<double> strides{8, 16, 32};
  auto rows = head->decode(out, strides, 3, false)[0];  // k = 3
  ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{3, 8}));
  EXPECT_NEAR(rows[0][4].item<float>(), 0.9f, 1e-6);
  EXPECT_EQ(rows[0][5].item<float>(), 2.0f);
  EXPECT_NEAR(rows[1][4].item<float>(), 0.8f, 1e-6);  // the same anchor again, another class
  EXPECT_EQ(rows[1][5].item<float>(), 0.0f);
  EXPECT_NEAR(rows[2][4].item<float>(), 0.7f, 1e-6);
  // Anchor 1 is P3 cell (x=1, y=0): centre (1.5, 0.5) * 8, box +-1 cell -> [4, -4, 20, 12].
  EXPECT_FLOAT_EQ(rows[0][0].item<float>(), 4.0f);
  EXPECT_FLOAT_EQ(rows[0][1].item<float>(), -4.0f);
  EXPECT_FLOAT_EQ(rows[0][2].item<float>(), 20.0f);
  EXPECT_FLOAT_EQ(rows[0][6].item<float>(), 1.0f);  // coefficients of anchor 1
  EXPECT_FLOAT_EQ(rows[0][7].item<float>(), 7.0f);
  // Agnostic: one row per anchor, its best class.
  auto agn = head->decode(out, strides, 3, true)[0];
  EXPECT_NEAR(agn[0][4].item<float>(), 0.9f, 1e-6);
  EXPECT_NEAR(agn[1][4].item<float>(), 0.7f, 1e-6);
  EXPECT_NEAR(agn[2][4].item<float>(), 0.01f, 1e-6);
  auto kept = engine::select_end2end(head->decode(out, strides, 3, false), 0.5);
  EXPECT_EQ(kept[0].size(0), 3);
}

// --------------------------------------------------------------------------------------- masks

TEST(Masks, CropKeepsHalfOpenBoxInterior) {
  auto m = torch::ones({2, 4, 5}, torch::kUInt8);
  auto boxes = boxes_of({{1, 0, 3, 2}, {0.5f, 0.5f, 2.5f, 4}});
  auto c = engine::crop_mask(m.clone(), boxes);
  // Box 0: columns 1, 2; rows 0, 1.
  EXPECT_EQ(c[0].sum().item<int64_t>(), 4);
  EXPECT_EQ(c[0][0][1].item<uint8_t>(), 1);
  EXPECT_EQ(c[0][0][3].item<uint8_t>(), 0);
  EXPECT_EQ(c[0][2][1].item<uint8_t>(), 0);
  // Box 1: columns 1, 2 (0 < 0.5; 2 < 2.5), rows 1..3.
  EXPECT_EQ(c[1].sum().item<int64_t>(), 6);
  EXPECT_EQ(c[1][0][1].item<uint8_t>(), 0);
  EXPECT_EQ(c[1][3][2].item<uint8_t>(), 1);
}

TEST(Masks, ProcessAtPrototypeResolution) {
  auto protos = torch::ones({2, 4, 4});
  protos[1] = -3;
  auto coefs = torch::tensor({{1.0f, 0.0f}, {1.0f, 1.0f}});  // logits +1 and -2
  auto boxes = boxes_of({{4, 4, 12, 12}, {0, 0, 16, 16}});   // input 16x16 -> /4 on the 4x4 grid
  auto m = engine::process_mask(protos, coefs, boxes, {16, 16});
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{2, 4, 4}));
  EXPECT_EQ(m.scalar_type(), torch::kUInt8);
  EXPECT_EQ(m[0].sum().item<int64_t>(), 4);  // rows/cols 1, 2
  EXPECT_EQ(m[0][1][1].item<uint8_t>(), 1);
  EXPECT_EQ(m[0][0][0].item<uint8_t>(), 0);
  EXPECT_EQ(m[1].sum().item<int64_t>(), 0);
  EXPECT_EQ(engine::process_mask(protos, torch::zeros({0, 2}), torch::zeros({0, 4}), {16, 16}).size(0), 0);
}

TEST(Masks, NativeUpsamplesBeforeCropping) {
  // Logits +1 in the left column, -1 in the right; bilinear (half-pixel centres) to 8x8 is
  // positive in columns 0..3 (column 3 samples 0.25 of the way: 1 - 2 * 0.375 > 0).
  auto protos = torch::tensor({{1.0f, -1.0f}, {1.0f, -1.0f}}).view({1, 2, 2});
  auto coefs = torch::ones({2, 1});
  auto boxes = boxes_of({{0, 0, 8, 8}, {0, 2, 2, 8}});
  auto m = engine::process_mask_native(protos, coefs, boxes, {8, 8});
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{2, 8, 8}));
  EXPECT_EQ(m[0].sum().item<int64_t>(), 32);
  EXPECT_EQ(m[0][5][3].item<uint8_t>(), 1);
  EXPECT_EQ(m[0][5][4].item<uint8_t>(), 0);
  EXPECT_EQ(m[1].sum().item<int64_t>(), 12);  // columns 0, 1; rows 2..7
}

TEST(Masks, ScaleBoxesAndMasksToOriginal) {
  structures::RatioPad lb{0.5, 0.5, 4, 2};  // original 20x12 (h x w) -> 10x6, padded left 4, top 2
  auto b = engine::scale_boxes(boxes_of({{4, 2, 10, 12}, {0, 0, 20, 20}}), lb, {20, 12});
  EXPECT_FLOAT_EQ(b[0][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(b[0][2].item<float>(), 12.0f);
  EXPECT_FLOAT_EQ(b[0][3].item<float>(), 20.0f);
  EXPECT_FLOAT_EQ(b[1][2].item<float>(), 12.0f);  // clipped to the width
  auto masks = torch::zeros({1, 14, 14});
  masks[0].slice(0, 2, 12).slice(1, 4, 10).fill_(1);  // exactly the image area
  auto s = engine::scale_masks(masks, lb, {20, 12});
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{1, 20, 12}));
  EXPECT_GT(s.min().item<float>(), 0.9999f);
}

TEST(Masks, EachAxisGoesBackWithItsOwnRoundedGain) {
  // 7x5 (h x w) in a 16x16 input: ratio 16/7, sides 16 and round(11.43) = 11, padded left
  // round(2.5 - 0.1) = 2. The x gain is 11/5, not the ratio.
  const auto lb = engine::fitted_letterbox({16, 16}, {7, 5});
  EXPECT_DOUBLE_EQ(lb.gain_h, 16.0 / 7);
  EXPECT_DOUBLE_EQ(lb.gain_w, 11.0 / 5);
  EXPECT_EQ(lb.pad_w, 2);
  EXPECT_EQ(lb.pad_h, 0);
  auto b = engine::scale_boxes(boxes_of({{2, 0, 13, 16}, {7.5f, 8, 8.6f, 12}}), lb, {7, 5});
  EXPECT_NEAR(b[0][2].item<float>(), 5.0f, 1e-5);  // the image's right edge
  EXPECT_NEAR(b[0][3].item<float>(), 7.0f, 1e-5);
  EXPECT_NEAR(b[1][0].item<float>(), 2.5f, 1e-5);
  EXPECT_NEAR(b[1][1].item<float>(), 3.5f, 1e-5);
  // Validation's ratio_pad: gains per axis, bottom padding one more than the top (3 rows of the
  // 10 high input): the cut holds round(h * gain_h) rows from the top padding, not input - top.
  structures::RatioPad val{0.5, 0.5, 0, 1};
  auto m = torch::zeros({1, 10, 6});
  m[0].slice(0, 1, 7).fill_(1);  // the 6 image rows
  auto s = engine::scale_masks(m, val, {12, 12});
  EXPECT_GT(s.min().item<float>(), 0.9999f);
}

TEST(Postprocess, NmsSelectsTheHeadAsTheReference) {
  EXPECT_FALSE(engine::uses_one_to_one(true, std::nullopt));  // None: one-to-many head and NMS
  EXPECT_FALSE(engine::uses_one_to_one(true, true));
  EXPECT_TRUE(engine::uses_one_to_one(true, false));
  EXPECT_FALSE(engine::uses_one_to_one(false, false));  // no one-to-one head
  // An end-to-end model's one-to-many decode for NMS is centre and size, from its corners.
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 2));
  m->eval();
  torch::NoGradGuard no_grad;
  auto out = m->forward(torch::rand({1, 3, 64, 64}));
  auto dense = engine::one_to_many_dense(*m, out);
  model::HeadOutputs o2m = out;
  o2m.one2one.reset();
  auto corners = m->head()->decode_dense(o2m, m->strides());
  ASSERT_EQ(dense.sizes(), corners.sizes());
  EXPECT_TRUE(torch::allclose(engine::xywh2xyxy(dense.narrow(1, 0, 4).transpose(1, 2)),
                              corners.narrow(1, 0, 4).transpose(1, 2), 1e-5, 1e-4));
  EXPECT_TRUE(torch::equal(dense.narrow(1, 4, dense.size(1) - 4), corners.narrow(1, 4, corners.size(1) - 4)));
}

// ------------------------------------------------------------------------------ IoU, matching

TEST(Matching, BoxAndMaskIou) {
  auto a = boxes_of({{0, 0, 2, 2}});
  auto b = boxes_of({{1, 1, 3, 3}, {5, 5, 6, 6}});
  auto iou = metrics::box_iou(a, b);
  EXPECT_NEAR(iou[0][0].item<float>(), 1.0 / 7, 1e-6);
  EXPECT_EQ(iou[0][1].item<float>(), 0.0f);
  auto m1 = torch::tensor({{1, 1, 0, 0}, {0, 0, 1, 1}}, torch::kFloat);
  auto m2 = torch::tensor({{1, 1, 1, 0}}, torch::kUInt8);
  auto mi = metrics::mask_iou(m1, m2);
  EXPECT_NEAR(mi[0][0].item<float>(), 2.0 / 3, 1e-6);
  EXPECT_NEAR(mi[1][0].item<float>(), 1.0 / 4, 1e-6);
}

TEST(Matching, OnePerPredictionThenLowerIndexWinsEachTruth) {
  // One ground truth; prediction 0 at IoU 0.6, prediction 1 at IoU 0.9: at thresholds <= 0.6 the
  // lower index takes the truth, above only prediction 1 qualifies.
  auto iou = torch::tensor({{0.6f, 0.9f}});
  auto c = metrics::match_predictions(torch::tensor({0.0f, 0.0f}), torch::tensor({0.0f}), iou);
  const auto& t = metrics::iou_thresholds();
  for (int k = 0; k < metrics::kIouThresholds; ++k) {
    EXPECT_EQ(c[0][k].item<bool>(), t[k] <= 0.6f) << k;
    EXPECT_EQ(c[1][k].item<bool>(), t[k] > 0.6f && t[k] <= 0.9f) << k;
  }
  // Different class: never correct.
  auto wrong = metrics::match_predictions(torch::tensor({1.0f}), torch::tensor({0.0f}), torch::tensor({{0.99f}}));
  EXPECT_FALSE(wrong.any().item<bool>());
  // A prediction takes its best truth: truth 1 (0.8), leaving truth 0 to prediction 1.
  auto two = metrics::match_predictions(torch::tensor({0.0f, 0.0f}), torch::tensor({0.0f, 0.0f}),
                                        torch::tensor({{0.7f, 0.75f}, {0.8f, 0.1f}}));
  EXPECT_TRUE(two[0][0].item<bool>());
  EXPECT_TRUE(two[1][0].item<bool>());
  EXPECT_EQ(metrics::match_predictions(torch::zeros({0}), torch::zeros({2}), torch::zeros({2, 0})).size(0), 0);
}

// ------------------------------------------------------------------------------------------ AP

TEST(Ap, PerfectCurveGives0995) {
  // The envelope drops to 0 at recall 1 (the last interpolation point), so a perfect curve gives
  // 0.995, as in the reference.
  EXPECT_NEAR(metrics::compute_ap({1.0}, {1.0}), 0.995, 1e-12);
  EXPECT_NEAR(metrics::compute_ap({0.5, 1.0}, {1.0, 1.0}), 0.995, 1e-12);
  EXPECT_EQ(metrics::compute_ap({0.0, 0.0}, {0.0, 0.0}), 0.0);  // all false positives
  // Half recall at full precision: the envelope is 1 below recall 0.5 and 0 from there (the repeated
  // recall takes the later, zero, precision): 0.49 + 0.01 / 2.
  EXPECT_NEAR(metrics::compute_ap({0.5}, {1.0}), 0.495, 1e-12);
}

TEST(Ap, NpInterpRepeatedPoints) {
  const double xp[] = {0, 0.5, 0.5, 0.5, 1};
  const double fp[] = {1, 0.8, 0.6, 0.4, 0};
  EXPECT_DOUBLE_EQ(metrics::np_interp(0.5, xp, fp, 5, 9, 9), 0.4);  // last of the repeats
  EXPECT_DOUBLE_EQ(metrics::np_interp(0.25, xp, fp, 5, 9, 9), 0.9);
  EXPECT_DOUBLE_EQ(metrics::np_interp(0.75, xp, fp, 5, 9, 9), 0.2);
  EXPECT_DOUBLE_EQ(metrics::np_interp(-1, xp, fp, 5, 9, 7), 9);
  EXPECT_DOUBLE_EQ(metrics::np_interp(2, xp, fp, 5, 9, 7), 7);
  EXPECT_DOUBLE_EQ(metrics::np_interp(1, xp, fp, 5, 9, 7), 0);
}

TEST(Ap, EdgeCases) {
  using V8 = std::vector<uint8_t>;
  auto row = [](bool v) { return V8(metrics::kIouThresholds, v ? 1 : 0); };
  // Class 0: 2 truths, both found; class 1: 1 truth, no predictions; class 2: predictions only
  // (ignored); class 3: 1 truth, only a false positive.
  V8 tp;
  for (bool v : {true, true, false, false}) {
    auto r = row(v);
    tp.insert(tp.end(), r.begin(), r.end());
  }
  std::vector<float> conf{0.9f, 0.8f, 0.7f, 0.6f};
  std::vector<int64_t> pred_cls{0, 0, 2, 3};
  std::vector<int64_t> target_cls{0, 1, 0, 3};
  auto m = metrics::ap_per_class(tp, conf, pred_cls, target_cls);
  ASSERT_EQ(m.classes, (std::vector<int64_t>{0, 1, 3}));
  for (int k = 0; k < metrics::kIouThresholds; ++k) {
    EXPECT_NEAR(m.ap[0][k], 0.995, 1e-12);
    EXPECT_EQ(m.ap[1][k], 0.0);
    EXPECT_EQ(m.ap[2][k], 0.0);
  }
  EXPECT_EQ(m.p[1], 0.0);
  EXPECT_EQ(m.r[1], 0.0);
  EXPECT_NEAR(m.r[0], 1.0, 1e-12);  // best mean F1 where class 0 is fully recalled
  EXPECT_NEAR(m.map50(), 0.995 / 3, 1e-12);
  EXPECT_NEAR(m.map(), 0.995 / 3, 1e-12);

  // No predictions at all.
  auto none = metrics::ap_per_class({}, {}, {}, {0, 0, 1});
  EXPECT_EQ(none.classes.size(), 2u);
  EXPECT_EQ(none.map(), 0.0);
  EXPECT_EQ(none.mp(), 0.0);
  // No ground truth at all.
  auto empty = metrics::ap_per_class(row(true), {0.5f}, {0}, {});
  EXPECT_EQ(empty.classes.size(), 0u);
  EXPECT_EQ(empty.map50(), 0.0);
  EXPECT_EQ(empty.mr(), 0.0);
}

TEST(Ap, StatsAccumulateImages) {
  metrics::SegmentationStats stats(3);
  auto tp = torch::ones({1, 10}, torch::kBool);
  stats.add_image(tp, torch::zeros({1, 10}, torch::kBool), torch::tensor({0.9f}), torch::tensor({1.0f}),
                  torch::tensor({1.0f, 1.0f}));
  stats.add_image(torch::zeros({0, 10}, torch::kBool), torch::zeros({0, 10}, torch::kBool), torch::zeros({0}),
                  torch::zeros({0}), torch::zeros({0}));
  auto m = stats.compute();
  EXPECT_EQ(m.images, 2);
  EXPECT_EQ(m.instances, 2);
  EXPECT_EQ(m.instances_per_class, (std::vector<int64_t>{0, 2, 0}));
  EXPECT_EQ(m.images_per_class, (std::vector<int64_t>{0, 1, 0}));
  ASSERT_EQ(m.per_class.size(), 1u);
  EXPECT_GT(m.box.map50, 0.0);
  EXPECT_EQ(m.mask.map50, 0.0);
  EXPECT_DOUBLE_EQ(m.fitness, m.box.map50_95 + m.mask.map50_95);
  EXPECT_DOUBLE_EQ(m.maps[0], m.fitness);
}

// ------------------------------------------------------------------------------------ validator

TEST(Validator, RunsOnTinyBatchesAndPrintsReferenceLayout) {
  torch::manual_seed(1);
  for (bool e2e : {true, false}) {
    model::SegmentationModel m(config::load_model_spec(e2e ? "yolo26n-seg.yaml" : "yolo11n-seg.yaml", 2));
    const int64_t H = 64, W = 96;
    auto make_batch = [&](engine::ValBatch& b, int which) {
      b.images = torch::randint(0, 256, {2, 3, H, W}, torch::kUInt8);
      b.targets.batch_idx = torch::tensor({0.0f, 0.0f});
      b.targets.cls = torch::tensor({0.0f, 1.0f}).view({2, 1});
      b.targets.bboxes = torch::tensor({{0.5f, 0.5f, 0.5f, 0.5f}, {0.3f, 0.3f, 0.2f, 0.2f}});
      b.targets.masks = torch::zeros({2, H / 4, W / 4}, torch::kUInt8);
      b.targets.masks[0].slice(0, 4, 12).slice(1, 6, 18).fill_(1);
      b.targets.masks[0].slice(0, 3, 6).slice(1, 5, 9).fill_(2);
      b.targets.sem_masks = torch::zeros({2, H / 4, W / 4}, torch::kInt64);
      b.info = {{100, 150, {1.5, 1.5, 0, 0}, "dir/000000000042.jpg"}, {128, 192, {0.5, 0.5, 0, 0}, "dir/b.jpg"}};
      (void)which;
    };
    int n = 0;
    auto source = [&](engine::ValBatch& b) {
      if (n == 2) return false;
      make_batch(b, n++);
      return true;
    };
    engine::ValidatorOptions o;
    o.names = {"cat", "dog"};
    o.verbose = true;
    o.speed = true;
    const auto json =
        std::filesystem::temp_directory_path() / (e2e ? "lucid_val_test_e2e.json" : "lucid_val_test.json");
    o.save_json = json.string();
    engine::Validator v(o);
    loss::SegmentationLoss criterion(loss::loss_options_for(*m));
    std::ostringstream log;
    m->train();
    auto r = v.run(*m, torch::kCPU, source, &criterion, &log);
    EXPECT_TRUE(m->is_training());  // restored
    EXPECT_EQ(r.batches, 2);
    EXPECT_EQ(r.metrics.images, 4);
    EXPECT_EQ(r.metrics.instances, 4);
    ASSERT_EQ(r.losses.size(), 5u);
    EXPECT_GT(r.losses[2], 0.0);  // cls loss
    for (double x : r.mean_results()) {
      EXPECT_GE(x, 0.0);
      EXPECT_LE(x, 1.0);
    }
    const auto text = log.str();
    EXPECT_EQ(text.rfind(engine::Validator::header() + "\n", 0), 0u) << text;
    EXPECT_NE(text.find("                   all          4          4"), std::string::npos) << text;
    EXPECT_NE(text.find("                   cat          2          2"), std::string::npos) << text;
    EXPECT_NE(text.find("Speed: "), std::string::npos);
    std::ifstream f(json);
    auto j = nlohmann::json::parse(f);
    ASSERT_TRUE(j.is_array());
    if (!j.empty()) {
      EXPECT_TRUE(j[0].contains("segmentation"));
      const auto& e = j[0];
      EXPECT_TRUE(e["image_id"] == 42 || e["image_id"] == "b");
    }
    std::filesystem::remove(json);
  }
  EXPECT_EQ(
      engine::Validator::header(),
      "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95)     Mask(P          R"
      "      mAP50  mAP50-95)");
  EXPECT_EQ(engine::coco80_to_coco91().size(), 80u);
}
