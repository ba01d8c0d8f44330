#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <ATen/autocast_mode.h>

#include "loss_cases.h"
#include "lucid/loss/assigner.h"
#include "lucid/loss/boxes.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"
#include "lucid/util/error.h"

using namespace lucid;
using torch::Tensor;

namespace {

// CIoU terms in double from first principles.
struct CiouParts {
  double iou, penalty, v, alpha;  // CIoU = iou - (penalty + v * alpha)
};
CiouParts ciou_parts(std::array<double, 4> a, std::array<double, 4> b) {
  const double eps = 1e-7;
  double w1 = a[2] - a[0], h1 = a[3] - a[1] + eps, w2 = b[2] - b[0], h2 = b[3] - b[1] + eps;
  double iw = std::max(std::min(a[2], b[2]) - std::max(a[0], b[0]), 0.0);
  double ih = std::max(std::min(a[3], b[3]) - std::max(a[1], b[1]), 0.0);
  double inter = iw * ih, uni = w1 * h1 + w2 * h2 - inter + eps, iou = inter / uni;
  double cw = std::max(a[2], b[2]) - std::min(a[0], b[0]), ch = std::max(a[3], b[3]) - std::min(a[1], b[1]);
  double c2 = cw * cw + ch * ch + eps;
  double dx = b[0] + b[2] - a[0] - a[2], dy = b[1] + b[3] - a[1] - a[3];
  double rho2 = (dx * dx + dy * dy) / 4;
  double v = 4 / (std::numbers::pi * std::numbers::pi) * std::pow(std::atan(w2 / h2) - std::atan(w1 / h1), 2);
  return {iou, rho2 / c2, v, v / (v - iou + 1 + eps)};
}
double ciou_expected(std::array<double, 4> a, std::array<double, 4> b) {
  auto p = ciou_parts(a, b);
  return p.iou - (p.penalty + p.v * p.alpha);
}

Tensor box(std::array<double, 4> b) { return torch::tensor({b[0], b[1], b[2], b[3]}, torch::kDouble); }

// Random raw head outputs as leaves that require grad.
model::HeadOutputs random_outputs(int64_t bs, int64_t h, int64_t w, int64_t nc, int64_t reg_max, bool e2e) {
  return loss_cases::leaves(loss_cases::random_outputs(bs, h, w, nc, reg_max, e2e), torch::kFloat, torch::kCPU);
}

loss::SegTargets no_targets(int64_t bs, int64_t h, int64_t w) {
  loss::SegTargets t;
  t.batch_idx = torch::zeros({0});
  t.cls = torch::zeros({0, 1});
  t.bboxes = torch::zeros({0, 4});
  t.masks = torch::zeros({bs, h / 4, w / 4}, torch::kUInt8);
  t.sem_masks = torch::zeros({bs, h / 4, w / 4}, torch::kUInt8);
  return t;
}

// One instance per listed image: a box (normalised xywh) with an overlap-mode mask filling it.
loss::SegTargets box_targets(int64_t bs, int64_t h, int64_t w, const std::vector<int64_t>& images) {
  auto t = no_targets(bs, h, w);
  const int64_t n = static_cast<int64_t>(images.size());
  t.batch_idx = torch::tensor(images, torch::kLong).to(torch::kFloat);
  t.cls = torch::ones({n, 1});
  t.bboxes = torch::tensor({0.5, 0.5, 0.5, 0.5}).repeat({n, 1});
  for (auto i : images) t.masks[i].slice(0, h / 16, 3 * h / 16).slice(1, w / 16, 3 * w / 16).fill_(1);
  t.sem_masks.fill_(1);
  return t;
}

}  // namespace

TEST(BoxGeometry, CiouMatchesClosedForm) {
  const std::vector<std::pair<std::array<double, 4>, std::array<double, 4>>> pairs{
      {{0, 0, 2, 2}, {1, 1, 3, 3}},           // same aspect: v = 0
      {{0, 0, 4, 2}, {0, 0, 2, 4}},           // different aspect
      {{0, 0, 1, 1}, {5, 5, 7, 9}},           // disjoint: negative
      {{10, 20, 30, 60}, {10, 20, 30, 60}}};  // identical
  for (const auto& [a, b] : pairs) {
    double got = loss::box_ciou_xyxy(box(a), box(b)).item<double>();
    EXPECT_NEAR(got, ciou_expected(a, b), 1e-12) << a[0] << "," << b[0];
  }
  EXPECT_NEAR(loss::box_ciou_xyxy(box({0, 0, 2, 2}), box({1, 1, 3, 3})).item<double>(), 1.0 / 7 - 2.0 / 18, 1e-6);
  EXPECT_NEAR(loss::box_ciou_xyxy(box({10, 20, 30, 60}), box({10, 20, 30, 60})).item<double>(), 1.0, 1e-6);
  EXPECT_LT(loss::box_ciou_xyxy(box({0, 0, 1, 1}), box({5, 5, 7, 9})).item<double>(), 0.0);
  EXPECT_NEAR(loss::box_iou_xyxy(box({0, 0, 2, 2}), box({1, 1, 3, 3})).item<double>(), 1.0 / 7, 1e-6);
}

TEST(BoxGeometry, CiouAlphaCarriesNoGradient) {
  const std::array<double, 4> base{0, 0, 4, 2}, other{0.5, 0.2, 2.5, 4.5};
  auto a = box(base).requires_grad_(true);
  loss::box_ciou_xyxy(a, box(other)).sum().backward();
  // Central differences of CIoU with alpha frozen at its value for `base`.
  const double alpha0 = ciou_parts(base, other).alpha, h = 1e-6;
  auto frozen = [&](std::array<double, 4> x) {
    auto p = ciou_parts(x, other);
    return p.iou - (p.penalty + p.v * alpha0);
  };
  for (int k = 0; k < 4; ++k) {
    auto plus = base, minus = base;
    plus[k] += h, minus[k] -= h;
    EXPECT_NEAR(a.grad()[k].item<double>(), (frozen(plus) - frozen(minus)) / (2 * h), 1e-6) << "coordinate " << k;
  }
}

TEST(BoxGeometry, DistancesClampToDflRange) {
  auto anchors = torch::tensor({{5.0, 5.0}});
  auto d = loss::bbox_to_dist(anchors, torch::tensor({{-20.0, 4.0, 6.0, 30.0}}), 15);
  EXPECT_TRUE(torch::allclose(d, torch::tensor({{14.99, 1.0, 1.0, 14.99}})));
  auto raw = loss::bbox_to_dist(anchors, torch::tensor({{-20.0, 4.0, 6.0, 30.0}}));
  EXPECT_TRUE(torch::allclose(raw, torch::tensor({{25.0, 1.0, 1.0, 25.0}})));
}

TEST(Assigner, SmallObjectsAreWidenedToTheSecondStride) {
  // A 4x4 px GT (8, 8, 12, 12) holds no anchor centre strictly inside (P3 centres 4, 12, ...; P4 8,
  // 24, ...; P5 16, 48); widened to 16 px, (2, 2, 18, 18), it holds four P3, one P4 and one P5 anchor.
  std::vector<Tensor> pts;
  for (int s : {8, 16, 32}) {
    const int n = 64 / s;
    auto g = torch::meshgrid({torch::arange(n) + 0.5, torch::arange(n) + 0.5}, "ij");
    pts.push_back(torch::stack({g[1], g[0]}, -1).view({-1, 2}) * s);
  }
  auto anchors = torch::cat(pts).to(torch::kFloat);
  const int64_t na = anchors.size(0);
  auto gt = torch::tensor({8.0f, 8.0f, 12.0f, 12.0f}).view({1, 1, 4});
  auto pd_boxes = torch::tensor({8.0f, 8.0f, 12.0f, 12.0f}).view({1, 1, 4}).expand({1, na, 4}).contiguous();
  auto scores = torch::full({1, na, 2}, 0.5f);
  loss::TaskAlignedAssigner assigner({.topk = 10, .num_classes = 2});
  auto a = assigner(scores, pd_boxes, anchors, torch::ones({1, 1, 1}), gt, torch::ones({1, 1, 1}));
  EXPECT_EQ(a.fg_mask.sum().item<int64_t>(), 6);
  EXPECT_TRUE(torch::equal(a.target_labels.masked_select(a.fg_mask), torch::ones({6}, torch::kLong)));
  // Each positive's soft score: t / max t * max CIoU = CIoU (all equal here), on class 1 only.
  auto s = a.target_scores.index({0, a.fg_mask[0]});
  EXPECT_TRUE(torch::allclose(s.select(1, 0), torch::zeros({6})));
  EXPECT_NEAR(s.select(1, 1).max().item<float>(), 1.0f, 1e-5);

  // Strides {4, 16}: sides below the second stride are widened, the same six candidates.
  auto second = loss::TaskAlignedAssigner({.topk = 10, .num_classes = 2, .strides = {4, 16}});
  EXPECT_EQ(second(scores, pd_boxes, anchors, torch::ones({1, 1, 1}), gt, torch::ones({1, 1, 1}))
                .fg_mask.sum()
                .item<int64_t>(),
            6);
  // One stride, 4: a 4 px side is not small, nothing is widened, no candidate.
  auto plain = loss::TaskAlignedAssigner({.topk = 10, .num_classes = 2, .strides = {4}});
  EXPECT_EQ(plain(scores, pd_boxes, anchors, torch::ones({1, 1, 1}), gt, torch::ones({1, 1, 1}))
                .fg_mask.sum()
                .item<int64_t>(),
            0);
}

TEST(Assigner, OneToOneKeepsOneAnchorPerGt) {
  torch::manual_seed(0);
  const int64_t na = 84;
  auto anchors = (torch::rand({na, 2}) * 64).to(torch::kFloat);
  auto pd = torch::cat({anchors - 10, anchors + 10}, -1).unsqueeze(0);
  auto gt = torch::tensor({{{4.0f, 4.0f, 40.0f, 40.0f}, {20.0f, 20.0f, 60.0f, 60.0f}, {0.0f, 0.0f, 0.0f, 0.0f}}});
  auto valid = torch::tensor({{{1.0f}, {1.0f}, {0.0f}}});
  auto labels = torch::tensor({{{0.0f}, {1.0f}, {0.0f}}});
  loss::TaskAlignedAssigner o2o({.topk = 7, .topk2 = 1, .num_classes = 2});
  auto a = o2o(torch::rand({1, na, 2}), pd, anchors, labels, gt, valid);
  EXPECT_EQ(a.fg_mask.sum().item<int64_t>(), 2);
  auto idx = a.target_gt_idx.masked_select(a.fg_mask);
  EXPECT_EQ(std::get<0>(torch::_unique(idx)).numel(), 2);
}

TEST(Assigner, NoGtMeansAllBackground) {
  loss::TaskAlignedAssigner assigner({.num_classes = 3});
  auto a = assigner(torch::rand({2, 10, 3}), torch::rand({2, 10, 4}), torch::rand({10, 2}), torch::zeros({2, 0, 1}),
                    torch::zeros({2, 0, 4}), torch::zeros({2, 0, 1}));
  EXPECT_FALSE(a.fg_mask.any().item<bool>());
  EXPECT_EQ(a.target_scores.abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(a.target_labels, torch::full({2, 10}, 3, torch::kLong)));
}

TEST(Assigner, SelectedMaskIousEqualTheDenseForm) {
  // The CPU form (selected pairs only) against the device form (every slot's top candidates, then
  // masked): the same IoUs, bit for bit, including chunks smaller than one image's pairs.
  torch::manual_seed(0);
  const int64_t bs = 2, m = 3, na = 40, k = 12, nm = 8, mh = 10, mw = 12;
  loss::MaskQuality mq;
  mq.coefs = torch::randn({bs, na, nm});
  mq.proto = torch::randn({bs, nm, mh, mw});
  mq.gt_masks = torch::rand({bs, m, mh, mw}) > 0.6;
  mq.scale = 0.25f;
  auto xy = torch::rand({bs, na, 2}) * 30, wh = torch::rand({bs, na, 2}) * 30 + 2;
  auto pd_bboxes = torch::cat({xy, xy + wh}, -1);
  auto top = std::get<1>(torch::rand({bs, m, na}).topk(k, -1));
  auto cand = torch::rand({bs, m, na}) > 0.3;
  cand.index_put_({1, 2}, false);  // a padding slot
  auto selected = torch::zeros_like(cand).scatter_(-1, top, true) & cand;
  auto dense = torch::zeros({bs, m, na}).scatter_(-1, top, loss::TaskAlignedAssigner::mask_ious(mq, top, pd_bboxes));
  dense = torch::where(selected, dense, torch::zeros({}));
  for (int64_t chunk : {int64_t{1} << 24, int64_t{mh * mw * 5}}) {
    mq.chunk_elements = chunk;
    auto sparse = loss::TaskAlignedAssigner::selected_mask_ious(mq, selected, pd_bboxes);
    EXPECT_TRUE(torch::equal(sparse, dense)) << "chunk " << chunk;
  }
  EXPECT_GT(dense.gt(0).sum().item<int64_t>(), 20);  // the case has overlapping masks to compare
}

TEST(SegmentationLoss, EmptyBatchHasOnlyTheClassTerm) {
  torch::manual_seed(0);
  for (bool e2e : {false, true}) {
    loss::LossOptions o;
    o.nc = 3, o.reg_max = e2e ? 1 : 16, o.end2end = e2e;
    loss::SegmentationLoss criterion(o);
    auto preds = random_outputs(2, 64, 96, 3, o.reg_max, e2e);
    auto r = criterion(preds, no_targets(2, 64, 96));
    auto items = r.items;
    ASSERT_EQ(items.numel(), 5);
    EXPECT_EQ(items[0].item<float>(), 0.0f);  // box
    EXPECT_EQ(items[1].item<float>(), 0.0f);  // seg
    EXPECT_EQ(items[3].item<float>(), 0.0f);  // dfl / l1
    EXPECT_EQ(items[4].item<float>(), 0.0f);  // sem
    // cls: BCE against all-zero targets summed over anchors and classes (the score sum clamps to 1).
    const auto& br = e2e ? *preds.one2one : preds.one2many;
    auto expected_cls = torch::nn::functional::binary_cross_entropy_with_logits(
                            br.scores, torch::zeros_like(br.scores),
                            torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)) *
                        0.5;
    EXPECT_NEAR(items[2].item<float>(), expected_cls.item<float>(), 1e-3 * expected_cls.item<float>());
    EXPECT_EQ(r.one2many.num_fg.item<int64_t>(), 0);
    r.total.sum().backward();
    // Box predictions are not in the graph; protos and coefficients are, with zero gradient.
    EXPECT_FALSE(preds.one2many.boxes.grad().defined());
    ASSERT_TRUE(preds.one2many.proto.grad().defined());
    EXPECT_EQ(preds.one2many.proto.grad().abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(preds.one2many.mask_coefficient.grad().abs().sum().item<float>(), 0.0f);
    EXPECT_GT(preds.one2many.scores.grad().abs().sum().item<float>(), 0.0f);
    if (e2e) {
      EXPECT_EQ(preds.one2many.semantic.grad().abs().sum().item<float>(), 0.0f);
    }
  }
}

TEST(SegmentationLoss, ReturnsItemsTimesBatchSizeWithNamedTerms) {
  torch::manual_seed(1);
  loss::LossOptions o;
  o.nc = 2, o.reg_max = 16;
  loss::SegmentationLoss criterion(o);
  auto preds = random_outputs(3, 64, 64, 2, 16, false);
  auto r = criterion(preds, box_targets(3, 64, 64, {0, 2}));
  EXPECT_TRUE(torch::allclose(r.total.detach(), r.items * 3));
  EXPECT_GT(r.one2many.num_fg.item<int64_t>(), 0);
  for (int k : {0, 1, 2, 3}) EXPECT_GT(r.items[k].item<float>(), 0.0f) << k;
  EXPECT_EQ(r.items[4].item<float>(), 0.0f);  // no semantic head
  auto names = criterion.item_names();
  EXPECT_EQ(names[3], "dfl_loss");
  o.reg_max = 1;
  EXPECT_EQ(loss::SegmentationLoss(o).item_names()[3], "l1_loss");
}

TEST(SegmentationLoss, EndToEndCombinesBranchesAndLogsOneToOne) {
  torch::manual_seed(2);
  loss::LossOptions o;
  o.nc = 2, o.reg_max = 1, o.end2end = true, o.epochs = 5;
  loss::SegmentationLoss criterion(o);
  criterion.update_epoch();
  auto preds = random_outputs(2, 64, 64, 2, 1, true);
  auto r = criterion(preds, box_targets(2, 64, 64, {0, 1, 1}));
  ASSERT_TRUE(r.one2one.has_value());
  auto expected = r.one2many.loss * criterion.one2many_weight() + r.one2one->loss * criterion.one2one_weight();
  EXPECT_TRUE(torch::allclose(r.total, expected));
  EXPECT_TRUE(torch::equal(r.items, r.one2one->items));
  EXPECT_GT(r.items[4].item<float>(), 0.0f);  // semantic term
  // One-to-one: at most one anchor per GT (3 GTs).
  EXPECT_LE(r.one2one->num_fg.item<int64_t>(), 3);
  EXPECT_GT(r.one2many.num_fg.item<int64_t>(), r.one2one->num_fg.item<int64_t>());
}

TEST(SegmentationLoss, EndToEndWeightScheduleIsLinear) {
  EXPECT_DOUBLE_EQ(loss::e2e_one2many_weight(0, 10), 0.8);
  EXPECT_NEAR(loss::e2e_one2many_weight(9, 10), 0.1, 1e-15);
  EXPECT_NEAR(loss::e2e_one2many_weight(20, 10), 0.1, 1e-15);
  EXPECT_NEAR(loss::e2e_one2many_weight(3, 10), 0.8 - 3 * 0.7 / 9, 1e-12);
  EXPECT_NEAR(loss::e2e_one2many_weight(1, 1), 0.1, 1e-15);  // epochs - 1 floors at 1

  loss::LossOptions o;
  o.end2end = true, o.epochs = 10;
  loss::SegmentationLoss criterion(o);
  EXPECT_DOUBLE_EQ(criterion.one2many_weight(), 0.8);
  EXPECT_DOUBLE_EQ(criterion.one2one_weight(), 1.0 - 0.8);
  double previous = 0.8;
  for (int e = 1; e < 10; ++e) {
    criterion.update_epoch();
    EXPECT_LT(criterion.one2many_weight(), previous);
    EXPECT_NEAR(criterion.one2many_weight() + criterion.one2one_weight(), 1.0, 1e-15);
    EXPECT_NEAR(previous - criterion.one2many_weight(), 0.7 / 9, 1e-12);
    previous = criterion.one2many_weight();
  }
  EXPECT_NEAR(criterion.one2many_weight(), 0.1, 1e-15);
  loss::SegmentationLoss resumed(o);
  resumed.set_epoch(4);
  loss::SegmentationLoss stepped(o);
  for (int e = 0; e < 4; ++e) stepped.update_epoch();
  EXPECT_EQ(resumed.one2many_weight(), stepped.one2many_weight());
  EXPECT_EQ(resumed.one2one_weight(), stepped.one2one_weight());
}

TEST(SegmentationLoss, RejectsUnsortedTargets) {
  loss::LossOptions o;
  o.nc = 2;
  loss::SegmentationLoss criterion(o);
  auto preds = random_outputs(2, 64, 64, 2, 16, false);
  auto t = box_targets(2, 64, 64, {1, 0});
  EXPECT_THROW(criterion(preds, t), UserError);
}

TEST(SegmentationLoss, Bf16PredictionsUnderAutocastRunInFp32) {
  // BF16 head outputs under (CPU) BF16 autocast give exactly the FP32 loss of the same values, and
  // the autocast state is restored afterwards.
  torch::manual_seed(3);
  loss::LossOptions o;
  o.nc = 2, o.reg_max = 1, o.end2end = true;
  auto preds = random_outputs(2, 64, 64, 2, 1, true);
  auto targets = box_targets(2, 64, 64, {0, 1, 1});
  auto cast = [](const model::HeadOutputs& p, torch::ScalarType t) {
    auto c = [&](const Tensor& x) { return x.detach().to(t).requires_grad_(true); };
    model::HeadOutputs out;
    out.feats = p.feats;
    out.one2many = {c(p.one2many.boxes), c(p.one2many.scores), c(p.one2many.mask_coefficient), c(p.one2many.proto),
                    c(p.one2many.semantic)};
    out.one2one = model::BranchOutputs{c(p.one2one->boxes), c(p.one2one->scores), c(p.one2one->mask_coefficient),
                                       out.one2many.proto.detach(), out.one2many.semantic.detach()};
    return out;
  };
  auto bf16 = cast(preds, torch::kBFloat16);
  auto fp32 = cast(bf16, torch::kFloat);
  loss::SegmentationLoss criterion(o);
  auto expected = criterion(fp32, targets);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  auto got = criterion(bf16, targets);
  EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_EQ(got.total.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(got.total, expected.total));
  EXPECT_TRUE(torch::equal(got.one2many.assignment.fg_mask, expected.one2many.assignment.fg_mask));
  got.total.sum().backward();
  EXPECT_EQ(bf16.one2many.proto.grad().scalar_type(), torch::kBFloat16);
  EXPECT_GT(bf16.one2one->boxes.grad().abs().sum().item<float>(), 0.0f);
}

TEST(SegmentationLoss, TrainsTheModelsOwnOutputs) {
  // Options from a built model; a training-mode forward's outputs go straight into the loss and the
  // gradient reaches the backbone (one-to-many) but the one-to-one head only through its own convs.
  torch::manual_seed(4);
  for (const char* name : {"yolo26n-seg.yaml", "yolo11n-seg.yaml"}) {
    model::SegmentationModel m(config::load_model_spec(name, 2));
    auto o = loss::loss_options_for(*m);
    EXPECT_EQ(o.nc, 2);
    EXPECT_EQ(o.end2end, m->end2end());
    EXPECT_EQ(o.reg_max, m->end2end() ? 1 : 16);
    ASSERT_EQ(o.strides, (std::vector<double>{8, 16, 32}));
    loss::SegmentationLoss criterion(o);
    m->train();
    auto r = criterion(m->forward(torch::rand({2, 3, 64, 96})), box_targets(2, 64, 96, {0, 1}));
    EXPECT_TRUE(torch::isfinite(r.total).all().item<bool>()) << name;
    r.total.sum().backward();
    int64_t with_grad = 0, total = 0;
    for (const auto& p : m->parameters()) {
      if (!p.requires_grad()) continue;
      ++total;
      with_grad += p.grad().defined();
    }
    EXPECT_EQ(with_grad, total) << name;
  }
}

// ---------------------------------------------------------------- capacity buckets

TEST(CapacityBuckets, PowersOfTwoFromZero) {
  EXPECT_EQ(loss::capacity_bucket(0), 0);
  EXPECT_EQ(loss::capacity_bucket(1), 1);
  EXPECT_EQ(loss::capacity_bucket(2), 2);
  EXPECT_EQ(loss::capacity_bucket(3), 4);
  EXPECT_EQ(loss::capacity_bucket(100), 128);
  EXPECT_EQ(loss::capacity_bucket(loss::kLargestListedCapacity), loss::kLargestListedCapacity);
  EXPECT_EQ(loss::capacity_bucket(loss::kLargestListedCapacity + 1), 2 * loss::kLargestListedCapacity);
  EXPECT_THROW(loss::capacity_bucket(-1), std::invalid_argument);
}

TEST(CapacityBuckets, PaddedTargetsHaveTheBucketsShapes) {
  torch::manual_seed(5);
  for (bool overlap : {true, false}) {
    auto t = loss_cases::random_targets({3, 0, 5}, 64, 96, 3, overlap);
    auto gt = loss::pad_targets(t, 3, 64, 96, overlap);
    EXPECT_EQ(gt.capacity(), 8);
    EXPECT_EQ(gt.labels.sizes(), (std::vector<int64_t>{3, 8, 1}));
    EXPECT_EQ(gt.boxes.sizes(), (std::vector<int64_t>{3, 8, 4}));
    EXPECT_EQ(gt.valid.sum().item<float>(), 8.0f);
    EXPECT_EQ(gt.valid[0].sum().item<float>(), 3.0f);
    EXPECT_EQ(gt.valid[2].narrow(0, 5, 3).sum().item<float>(), 0.0f);  // padding slots
    // Image 2's third instance: its class and its pixel box (cx, cy, w, h normalised -> xyxy px).
    EXPECT_EQ(gt.labels[2][2][0].item<float>(), t.cls[5][0].item<float>());
    auto b = t.bboxes[5];
    auto x1 = (b[0].item<float>() - b[2].item<float>() / 2) * 96;
    EXPECT_NEAR(gt.boxes[2][2][0].item<float>(), x1, 1e-4);
    if (overlap) {
      EXPECT_EQ(gt.masks.sizes(), (std::vector<int64_t>{3, 16, 24}));
      EXPECT_EQ(gt.masks.scalar_type(), torch::kUInt8);
    } else {
      EXPECT_EQ(gt.masks.sizes(), (std::vector<int64_t>{3, 8, 16, 24}));
      EXPECT_TRUE(torch::equal(gt.masks[2][2], t.masks[5]));
      EXPECT_EQ(gt.masks[1].sum().item<int64_t>(), 0);
    }
    // A larger bucket on request; a smaller one than the batch needs is refused.
    EXPECT_EQ(loss::pad_targets(t, 3, 64, 96, overlap, 32).capacity(), 32);
    EXPECT_THROW(loss::pad_targets(t, 3, 64, 96, overlap, 4), UserError);
    // Static buffers of one bucket take the next batch of that bucket, not another bucket's.
    auto buffers = loss::upload(gt, torch::kCPU);
    auto other = loss::pad_targets(loss_cases::random_targets({1, 6, 2}, 64, 96, 3, overlap), 3, 64, 96, overlap);
    loss::copy_targets(other, buffers);
    EXPECT_TRUE(torch::equal(buffers.boxes, other.boxes));
    EXPECT_THROW(loss::copy_targets(loss::pad_targets(t, 3, 64, 96, overlap, 16), buffers), std::invalid_argument);
  }
  // Beyond 255 instances the overlap map is int32, whatever the loader gave.
  auto many = loss_cases::random_targets({300, 2}, 64, 64, 3, true);
  auto gt = loss::pad_targets(many, 2, 64, 64, true);
  EXPECT_EQ(gt.capacity(), 512);
  EXPECT_EQ(gt.masks.scalar_type(), torch::kInt32);
  EXPECT_EQ(loss::overlap_mask_dtype(255), torch::kUInt8);
  EXPECT_EQ(loss::overlap_mask_dtype(256), torch::kInt32);
  auto none = loss::pad_targets(no_targets(2, 64, 64), 2, 64, 64, true);
  EXPECT_EQ(none.capacity(), 0);
  EXPECT_EQ(none.boxes.sizes(), (std::vector<int64_t>{2, 0, 4}));
}

// The fit's least capacity: the bucket of the 99th-percentile image, so one crowded image of a
// hundred does not set it; pad_targets applies it to batches with instances only.
TEST(CapacityBuckets, TheFloorIsThe99thPercentileImagesBucketAndPadsOnlyBatchesWithInstances) {
  EXPECT_EQ(loss::capacity_floor({}), 0);
  EXPECT_EQ(loss::capacity_floor({0, 0, 0}), 0);
  std::vector<int64_t> counts(100, 3);
  counts.push_back(300);
  EXPECT_EQ(loss::capacity_floor(counts), 4);  // 101 images: the 100th smallest
  counts.push_back(200);
  EXPECT_EQ(loss::capacity_floor(counts), 256);  // 102 images: the 101st smallest
  EXPECT_EQ(loss::capacity_floor({42, 1, 17, 5}), 64);
  auto t = loss_cases::random_targets({3, 0, 5}, 64, 96, 3, true);
  EXPECT_EQ(loss::pad_targets(t, 3, 64, 96, true, -1, 32).capacity(), 32);
  EXPECT_EQ(loss::pad_targets(t, 3, 64, 96, true, -1, 4).capacity(), 8);  // the batch's own bucket is larger
  EXPECT_EQ(loss::pad_targets(no_targets(2, 64, 64), 2, 64, 64, true, -1, 32).capacity(), 0);
  EXPECT_EQ(loss::pad_targets(t, 3, 64, 96, true, 16, 32).capacity(), 16);  // a capacity asked for is kept
}

namespace {

// One loss call on fresh leaves of `raw` with targets padded to `capacity`, and its gradients
// w.r.t. every prediction (zeros where a prediction is not in the graph, noted in `defined`).
struct LossRun {
  Tensor total, items;
  std::vector<std::string> names;
  std::vector<Tensor> grads;
  std::vector<bool> defined;
};

LossRun run_loss(const loss::LossOptions& o, const model::HeadOutputs& raw, const loss::SegTargets& t, int64_t h,
                 int64_t w, int64_t capacity) {
  auto preds = loss_cases::leaves(raw, torch::kFloat, torch::kCPU);
  loss::SegmentationLoss criterion(o);
  const int64_t bs = raw.one2many.scores.size(0);
  auto gt = criterion.pad(t, bs, static_cast<double>(h), static_cast<double>(w), capacity);
  EXPECT_EQ(gt.capacity(), capacity);
  auto r = criterion(preds, gt);
  r.total.sum().backward();
  LossRun out{r.total.detach(), r.items, {}, {}, {}};
  auto add = [&](const std::string& name, const Tensor& leaf) {
    if (!leaf.defined() || !leaf.requires_grad()) return;
    out.names.push_back(name);
    out.defined.push_back(leaf.grad().defined());
    out.grads.push_back(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf));
  };
  add("o2m.boxes", preds.one2many.boxes);
  add("o2m.scores", preds.one2many.scores);
  add("o2m.mask_coefficient", preds.one2many.mask_coefficient);
  add("o2m.proto", preds.one2many.proto);
  add("o2m.semantic", preds.one2many.semantic);
  if (preds.one2one) {
    add("o2o.boxes", preds.one2one->boxes);
    add("o2o.scores", preds.one2one->scores);
    add("o2o.mask_coefficient", preds.one2one->mask_coefficient);
  }
  return out;
}

// max |a - b| <= rel * max |b|
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double rel) {
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << "shapes differ";
  const double scale = b.abs().max().item<double>();
  const double diff = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  if (diff <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max difference " << diff << " > " << rel << " x " << scale;
}

// The bucket changes only the mask term's reductions (more zero slots): the seg item and the
// gradients of mask coefficients and prototypes agree within 1e-6 relative; every other item and
// gradient (dense over anchors, assignment independent of padding rows) is byte-equal.
void expect_same_loss(const LossRun& got, const LossRun& want, const std::string& what) {
  for (int k = 0; k < loss::kLossTerms; ++k) {
    if (k == 1) {
      EXPECT_TRUE(close(got.items[k], want.items[k], 1e-6)) << what << " seg item";
      EXPECT_TRUE(close(got.total[k], want.total[k], 1e-6)) << what << " seg total";
    } else {
      EXPECT_TRUE(torch::equal(got.items[k], want.items[k])) << what << " item " << k;
      EXPECT_TRUE(torch::equal(got.total[k], want.total[k])) << what << " total " << k;
    }
  }
  ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
  for (size_t i = 0; i < got.grads.size(); ++i) {
    const auto& name = got.names[i];
    if (name.find("mask_coefficient") != std::string::npos || name.find("proto") != std::string::npos) {
      EXPECT_TRUE(close(got.grads[i], want.grads[i], 1e-6)) << what << " d/d " << name;
    } else {
      EXPECT_TRUE(torch::equal(got.grads[i], want.grads[i])) << what << " d/d " << name;
    }
  }
}

void expect_same_bytes(const LossRun& a, const LossRun& b, const std::string& what) {
  EXPECT_TRUE(torch::equal(a.total, b.total)) << what;
  EXPECT_TRUE(torch::equal(a.items, b.items)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    EXPECT_EQ(a.defined[i], b.defined[i]) << what << " " << a.names[i];
    EXPECT_TRUE(torch::equal(a.grads[i], b.grads[i])) << what << " d/d " << a.names[i];
  }
}

loss::LossOptions small_options(bool e2e, bool overlap) {
  loss::LossOptions o;
  o.nc = 3, o.reg_max = e2e ? 1 : 16, o.end2end = e2e, o.overlap_mask = overlap;
  return o;
}

}  // namespace

// Exact capacity (the fullest image's count, no padding slot in it) against its bucket and a larger
// one; an image without instances (so without foreground) in the middle; both heads, both mask modes.
TEST(CapacityBuckets, LossOfTheBucketEqualsTheExactCapacity_BytesExceptMaskTermWithin1e6) {
  for (bool e2e : {false, true}) {
    for (bool overlap : {true, false}) {
      torch::manual_seed(6);
      auto raw = loss_cases::random_outputs(3, 64, 96, 3, e2e ? 1 : 16, e2e);
      auto t = loss_cases::random_targets({7, 0, 3}, 64, 96, 3, overlap);
      auto o = small_options(e2e, overlap);
      auto exact = run_loss(o, raw, t, 64, 96, 7);
      EXPECT_GT(exact.items[1].item<float>(), 0.0f);
      const std::string what = std::string(e2e ? "yolo26" : "yolo11") + (overlap ? " overlap" : " per-instance");
      for (int64_t capacity : {8, 32})
        expect_same_loss(run_loss(o, raw, t, 64, 96, capacity), exact, what + " M " + std::to_string(capacity));
      expect_same_bytes(run_loss(o, raw, t, 64, 96, 8), run_loss(o, raw, t, 64, 96, 8), what + " repeated");
    }
  }
}

// No instances: bucket 0 keeps box predictions out of the graph (as the reference); a padded bucket
// gives the same items byte for byte and zero gradients where bucket 0 has none.
TEST(CapacityBuckets, EmptyBatchInAnyBucketGivesTheSameBytes) {
  for (bool e2e : {false, true}) {
    torch::manual_seed(7);
    auto raw = loss_cases::random_outputs(2, 64, 64, 3, e2e ? 1 : 16, e2e);
    auto t = loss_cases::random_targets({0, 0}, 64, 64, 3, true);
    auto o = small_options(e2e, true);
    auto none = run_loss(o, raw, t, 64, 64, 0);
    EXPECT_FALSE(none.defined[0]);  // o2m.boxes
    for (int64_t capacity : {1, 4}) {
      auto padded = run_loss(o, raw, t, 64, 64, capacity);
      EXPECT_TRUE(torch::equal(padded.items, none.items)) << capacity;
      EXPECT_TRUE(torch::equal(padded.total, none.total)) << capacity;
      for (size_t i = 0; i < none.grads.size(); ++i)
        EXPECT_TRUE(torch::equal(padded.grads[i], none.grads[i])) << capacity << " d/d " << none.names[i];
    }
  }
}

// More than 255 instances in one image: the 512 bucket (int32 overlap map) against the exact count
// and against 1024, beyond the listed buckets.
TEST(CapacityBuckets, CrowdedImageNeedingTheLargestBucket_BytesExceptMaskTermWithin1e6) {
  for (bool overlap : {true, false}) {
    torch::manual_seed(8);
    auto raw = loss_cases::random_outputs(2, 64, 64, 3, 16, false);
    auto t = loss_cases::random_targets({300, 4}, 64, 64, 3, overlap);
    auto o = small_options(false, overlap);
    auto exact = run_loss(o, raw, t, 64, 64, 300);
    EXPECT_GT(exact.items[1].item<float>(), 0.0f);
    EXPECT_EQ(loss::capacity_bucket(300), loss::kLargestListedCapacity);
    for (int64_t capacity : {loss::kLargestListedCapacity, 2 * loss::kLargestListedCapacity})
      expect_same_loss(run_loss(o, raw, t, 64, 64, capacity), exact, "M " + std::to_string(capacity));
  }
}

// The mask term's chunking (one slot per chunk against all at once) changes nothing beyond rounding.
TEST(CapacityBuckets, MaskTermChunksAgreeWithin1e6) {
  for (bool overlap : {true, false}) {
    torch::manual_seed(9);
    auto raw = loss_cases::random_outputs(2, 64, 96, 3, 1, true);
    auto t = loss_cases::random_targets({5, 2}, 64, 96, 3, overlap);
    auto whole = small_options(true, overlap);
    auto chunked = whole;
    chunked.mask_chunk_elements = 1;
    expect_same_loss(run_loss(chunked, raw, t, 64, 96, 8), run_loss(whole, raw, t, 64, 96, 8),
                     overlap ? "overlap" : "per-instance");
  }
}
