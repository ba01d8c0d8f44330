#include "lucid/metrics/confusion_matrix.h"

#include <algorithm>
#include <numeric>

#include "lucid/metrics/detection_metrics.h"

namespace lucid::metrics {

namespace {

std::vector<int64_t> classes_of(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  auto c = t.reshape({-1}).to(torch::kCPU, torch::kFloat32).to(torch::kInt64).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(int64_t nc, double conf, double iou)
    : nc_(nc), conf_(conf), iou_(iou), m_(static_cast<size_t>((nc + 1) * (nc + 1)), 0.0) {}

void ConfusionMatrix::add_image(const torch::Tensor& det_boxes, const torch::Tensor& det_conf,
                                const torch::Tensor& det_cls, const torch::Tensor& gt_boxes,
                                const torch::Tensor& gt_cls) {
  auto count = [&](int64_t row, int64_t col) {
    if (row < 0 || row > nc_ || col < 0 || col > nc_) return;
    m_[row * (nc_ + 1) + col] += 1;
  };
  const auto gc = classes_of(gt_cls);
  const bool no_pred = !det_cls.defined() || det_cls.numel() == 0;
  if (no_pred) {  // every truth missed (the reference counts them before any confidence filter)
    for (auto c : gc) count(nc_, c);
    return;
  }
  auto keep = (det_conf.reshape({-1}) > conf_).to(det_boxes.device());
  auto boxes = det_boxes.index({keep});
  const auto dc = classes_of(det_cls.reshape({-1}).index({keep.to(det_cls.device())}));
  if (gc.empty()) {
    for (auto c : dc) count(c, nc_);
    return;
  }
  std::vector<int64_t> gt_match(gc.size(), -1);
  std::vector<uint8_t> det_matched(dc.size(), 0);
  if (!dc.empty()) {
    auto iou = box_iou(gt_boxes.to(boxes.device(), torch::kFloat32), boxes.to(torch::kFloat32))
                   .to(torch::kCPU)
                   .contiguous();
    const float* v = iou.data_ptr<float>();
    struct Pair {
      int64_t gt, det;
      float iou;
    };
    std::vector<Pair> pairs;
    const int64_t n = static_cast<int64_t>(dc.size());
    for (int64_t i = 0; i < static_cast<int64_t>(gc.size()); ++i)
      for (int64_t j = 0; j < n; ++j)
        if (v[i * n + j] > iou_) pairs.push_back({i, j, v[i * n + j]});
    auto by_iou = [](const Pair& a, const Pair& b) { return a.iou > b.iou; };
    // Highest IoU per detection, then highest IoU per truth.
    std::stable_sort(pairs.begin(), pairs.end(), by_iou);
    std::vector<uint8_t> seen_det(dc.size(), 0), seen_gt(gc.size(), 0);
    std::vector<Pair> per_det;
    for (const auto& p : pairs)
      if (!seen_det[p.det]) {
        seen_det[p.det] = 1;
        per_det.push_back(p);
      }
    for (const auto& p : per_det)
      if (!seen_gt[p.gt]) {
        seen_gt[p.gt] = 1;
        gt_match[p.gt] = p.det;
        det_matched[p.det] = 1;
      }
  }
  for (size_t i = 0; i < gc.size(); ++i) {
    if (gt_match[i] >= 0)
      count(dc[gt_match[i]], gc[i]);
    else
      count(nc_, gc[i]);
  }
  for (size_t j = 0; j < dc.size(); ++j)
    if (!det_matched[j]) count(dc[j], nc_);
}

std::vector<double> ConfusionMatrix::normalized() const {
  const int64_t k = nc_ + 1;
  std::vector<double> out(m_.size());
  for (int64_t c = 0; c < k; ++c) {
    double s = 0;
    for (int64_t r = 0; r < k; ++r) s += m_[r * k + c];
    for (int64_t r = 0; r < k; ++r) out[r * k + c] = m_[r * k + c] / (s + 1e-9);
  }
  return out;
}

}  // namespace lucid::metrics
