// What one validation gives: the reference's box and mask metrics, the mean validation losses, the
// box confusion matrix and the time per image of each phase. A value type, below the validator that
// fills it (evaluate/validator.h) and the reports that show it (report/).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lucid/metrics/confusion_matrix.h"
#include "lucid/metrics/detection_metrics.h"

namespace lucid::metrics {

struct ValSpeed {
  double preprocess = 0, inference = 0, loss = 0, postprocess = 0;  // milliseconds per image
};

// P, R, mAP50, mAP50-95 of boxes, then of masks.
std::array<double, 8> mean_results(const SetResults& box, const SetResults& mask);

struct ValResults {
  SegmentationMetrics metrics;
  std::vector<double> losses;  // mean loss items per batch (empty when no loss was given)
  int64_t batches = 0;
  ValSpeed speed;
  // Box confusion matrix (IoU 0.45, detections with conf above the validator's conf), as the
  // reference's validator accumulates it.
  ConfusionMatrix confusion;

  std::array<double, 8> mean_results() const { return metrics::mean_results(metrics.box, metrics.mask); }
  double fitness() const { return metrics.fitness; }
  // "metrics/precision(B)", ..., "metrics/mAP50-95(M)" in mean_results() order.
  static const std::array<std::string, 8>& keys();
};

}  // namespace lucid::metrics
