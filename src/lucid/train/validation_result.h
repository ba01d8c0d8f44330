// What a fit's validation of an epoch gives the loop: the metrics, the losses and the fitness that
// best and early stopping judge (train/early_stopping.h).
#pragma once
#include <array>
#include <functional>

#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"

namespace lucid::engine {

struct ValidationResult {
  std::array<double, 8> metrics{};  // P R mAP50 mAP50-95 for boxes, then for masks
  std::array<double, 5> losses{};
  double fitness = 0;
  bool validated = false;  // false: the epoch was not validated (val=False), fitness is not measured
};

using Validate = std::function<ValidationResult(model::SegmentationModel& ema, loss::SegmentationLoss& loss)>;

}  // namespace lucid::engine
