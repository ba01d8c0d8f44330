// Detection and segmentation metrics as the reference validator computes them (its own AP, not
// COCO's; COCO evaluation lives in coco_eval.h):
// - IoU of predictions with ground truth: boxes (xyxy) or flattened binary masks, in FP32;
// - matching per IoU threshold 0.50:0.05:0.95: pairs of equal class with IoU >= threshold, taken in
//   descending IoU order, one per prediction, then one per ground truth (the lower prediction index
//   wins, which after NMS is the higher confidence);
// - per class AP from the precision envelope interpolated at 101 recall points and integrated with
//   the trapezoidal rule; precision and recall at the confidence of the highest class-mean F1 (the F1
//   curve over 1000 confidences smoothed by a 101-point box filter);
// - mean results per set (P, R, mAP50, mAP50-95) and fitness = mAP50-95(B) + mAP50-95(M).
// Host arithmetic is double precision and follows numpy's (np.interp's handling of repeated recall
// values, first maximum on ties), so results agree with the reference to rounding.
#pragma once
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace lucid::metrics {

using torch::Tensor;

constexpr int kIouThresholds = 10;
constexpr int kCurvePoints = 1000;  // confidence (and recall) axis of the curves: linspace(0, 1, 1000)

// The ten IoU thresholds 0.50, 0.55, ..., 0.95 as FP32 values (as torch.linspace gives them).
const std::array<float, kIouThresholds>& iou_thresholds();

// (N, M) IoU of boxes a (N, 4) and b (M, 4), xyxy, computed in FP32 with eps 1e-7 in the union.
Tensor box_iou(const Tensor& a, const Tensor& b, double eps = 1e-7);

// (N, M) IoU of flattened binary masks a (N, P) and b (M, P) (any numeric dtype, taken as FP32).
Tensor mask_iou(const Tensor& a, const Tensor& b, double eps = 1e-7);

// Correct-prediction matrix (D, 10) bool on the CPU. pred_cls (D), true_cls (L), iou (L, D) of any
// device; IoU of pairs whose classes differ counts as 0.
Tensor match_predictions(const Tensor& pred_cls, const Tensor& true_cls, const Tensor& iou);

// The AP of one precision/recall curve (recall and precision after each prediction, in confidence
// order): sentinels (0, 1) before and (last recall, 0), (1, 0) after, the precision envelope, 101
// recall points, trapezoidal rule.
double compute_ap(const std::vector<double>& recall, const std::vector<double>& precision);

// The recall points with sentinels and the precision envelope (running maximum from the right) of
// a curve, as compute_ap integrates them.
std::pair<std::vector<double>, std::vector<double>> precision_envelope(const std::vector<double>& recall,
                                                                       const std::vector<double>& precision);

// numpy's box filter smooth(y, f) (odd width round(n f 2) // 2 + 1, ends padded with the end values).
std::vector<double> smooth(const std::vector<double>& y, double f);

// np.interp(x, xp, fp, left, right) for one x; xp ascending (repeats allowed).
double np_interp(double x, const double* xp, const double* fp, size_t n, double left, double right);

// Per-class results of one set (boxes or masks), for the classes that have ground truth.
struct ClassMetrics {
  std::vector<int64_t> classes;                        // ascending class ids with ground truth
  std::vector<double> p, r, f1;                        // at the max mean-F1 confidence
  std::vector<std::array<double, kIouThresholds>> ap;  // per class, per IoU threshold
  std::vector<double> p_curve, r_curve, f1_curve;      // (classes x 1000) vs confidence, row-major
  std::vector<double> pr_curve;                        // (classes x 1000) precision vs recall at IoU 0.5
  int64_t best_index = 0;                              // index on the 1000-point confidence axis

  size_t size() const { return classes.size(); }
  double ap50(size_t i) const { return ap[i][0]; }
  double ap50_95(size_t i) const;
  double mp() const;     // mean precision (0 without classes)
  double mr() const;     // mean recall
  double map50() const;  // mean AP at IoU 0.5
  double map75() const;
  double map() const;  // mean over classes and thresholds
};

// ap_per_class: tp (N x 10 row-major, nonzero = correct), conf (N), pred_cls (N), target_cls (M).
ClassMetrics ap_per_class(const std::vector<uint8_t>& tp, const std::vector<float>& conf,
                          const std::vector<int64_t>& pred_cls, const std::vector<int64_t>& target_cls);

// The 4 reported numbers of one set.
struct SetResults {
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
};

struct ClassResult {
  int64_t cls = 0;
  int64_t images = 0;     // images containing the class
  int64_t instances = 0;  // ground-truth instances
  SetResults box, mask;
};

struct SegmentationMetrics {
  SetResults box, mask;
  double fitness = 0;  // box.map50_95 + mask.map50_95
  int64_t images = 0;
  int64_t instances = 0;
  std::vector<ClassResult> per_class;        // classes with ground truth, ascending
  std::vector<int64_t> instances_per_class;  // (nc) ground-truth instances per class
  std::vector<int64_t> images_per_class;     // (nc) images containing each class
  ClassMetrics box_detail, mask_detail;
  // Per class mAP50-95 of boxes plus masks (nc); classes without ground truth get the mean.
  std::vector<double> maps;
};

// Accumulates per-image statistics (the reference's SegmentMetrics.update_stats) and computes the
// metrics at the end.
class SegmentationStats {
 public:
  explicit SegmentationStats(int64_t nc) : nc_(nc) {}

  // One image: tp and tp_m (n, 10) bool, conf (n), pred_cls (n), target_cls (m); any device.
  void add_image(const Tensor& tp, const Tensor& tp_m, const Tensor& conf, const Tensor& pred_cls,
                 const Tensor& target_cls);
  // Same from host arrays.
  void add_image(const std::vector<uint8_t>& tp, const std::vector<uint8_t>& tp_m, const std::vector<float>& conf,
                 const std::vector<int64_t>& pred_cls, const std::vector<int64_t>& target_cls);

  SegmentationMetrics compute() const;
  void clear();
  int64_t images() const { return images_; }

 private:
  int64_t nc_;
  int64_t images_ = 0;
  std::vector<uint8_t> tp_, tp_m_;
  std::vector<float> conf_;
  std::vector<int64_t> pred_cls_, target_cls_, target_img_;
};

}  // namespace lucid::metrics
