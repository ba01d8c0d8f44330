// What the fit needs from the data pipeline: per epoch, a fixed sequence of training batches
// (uint8 images and targets), deterministic for (seed, epoch).
#pragma once
#include <optional>

#include "lucid/loss/targets.h"

namespace lucid::engine {

struct TrainBatch {
  torch::Tensor images;  // (B, 3, H, W) uint8 RGB, on the host (pinned where CUDA is used)
  loss::SegTargets targets;
  torch::Tensor hsv_gains;  // (B, 3) per-sample HSV gains for device HSV, or undefined
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;  // images per epoch
  virtual int64_t batches_per_epoch() const = 0;
  // Starts producing the batches of `epoch`; `mosaic` false: close_mosaic has turned mosaic, mixup,
  // cutmix and copy_paste off.
  virtual void start_epoch(int64_t epoch, bool mosaic) = 0;
  virtual std::optional<TrainBatch> next() = 0;  // nullopt at the end of the epoch
};

}  // namespace lucid::engine
