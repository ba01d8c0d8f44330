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
    auto iou =
        box_iou(gt_boxes.to(boxes.device(), torch::kFloat32), boxes.to(torch::kFloat32)).to(torch::kCPU).contiguous();
    auto conf_t =
        det_conf.reshape({-1}).index({keep.to(det_conf.device())}).to(torch::kCPU, torch::kFloat32).contiguous();
    std::vector<float> v(iou.data_ptr<float>(), iou.data_ptr<float>() + iou.numel());
    const float* conf = conf_t.data_ptr<float>();
    const int64_t n = static_cast<int64_t>(dc.size()), g = static_cast<int64_t>(gc.size());
    // Greedy one-to-one matching (the reference 8.4.190): detections with some IoU above the
    // threshold, in descending confidence (stable), each claims its best unclaimed truth.
    std::vector<int64_t> order;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < g; ++i)
        if (v[i * n + j] > iou_) {
          order.push_back(j);
          break;
        }
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return conf[a] > conf[b]; });
    for (const int64_t j : order) {
      int64_t best = 0;
      for (int64_t i = 1; i < g; ++i)
        if (v[i * n + j] > v[best * n + j]) best = i;
      if (!(v[best * n + j] > iou_)) continue;
      gt_match[best] = j;
      std::fill(v.begin() + best * n, v.begin() + (best + 1) * n, 0.0f);
    }
    for (int64_t i = 0; i < g; ++i)
      if (gt_match[i] >= 0) det_matched[gt_match[i]] = 1;
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
