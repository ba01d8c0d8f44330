// The reference's detection confusion matrix (ultralytics ConfusionMatrix, task detect/segment):
// (nc + 1) x (nc + 1) counts, rows = predicted class, columns = true class, the last row and column
// = background. Per image, detections with conf > the validator's conf are matched to ground-truth
// boxes with IoU > 0.45 (greedy and one-to-one: in descending confidence each detection claims its
// best unclaimed truth, as the reference 8.4.190; 8.4.114 paired by descending IoU instead); a
// matched pair counts at (predicted class, true class), an unmatched truth at (background, class),
// an unmatched detection at (class, background).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace lucid::metrics {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t nc = 0, double conf = 0.25, double iou = 0.45);

  // One image: detections boxes (n, 4) xyxy, conf (n), cls (n); ground truth boxes (m, 4) xyxy in the
  // same frame and cls (m). Any device.
  void add_image(const torch::Tensor& det_boxes, const torch::Tensor& det_conf, const torch::Tensor& det_cls,
                 const torch::Tensor& gt_boxes, const torch::Tensor& gt_cls);

  int64_t nc() const { return nc_; }
  // Count at (predicted row, true column); row or column nc is background.
  double at(int64_t predicted, int64_t truth) const { return m_[predicted * (nc_ + 1) + truth]; }
  const std::vector<double>& counts() const { return m_; }  // row-major (nc + 1)^2
  // Columns divided by their sums (+1e-9), as the reference's normalised plot.
  std::vector<double> normalized() const;

 private:
  int64_t nc_;
  double conf_, iou_;
  std::vector<double> m_;
};

}  // namespace lucid::metrics
