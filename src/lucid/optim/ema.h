// Exponential moving average of the model (decay 0.9999 ramped by 1 - exp(-updates / tau)), over
// every floating-point parameter and buffer, BatchNorm statistics included. The decay for each
// update is computed on the host from the update count and copied to the device with the update.
#pragma once
#include "lucid/model/model.h"

namespace lucid::optim {

class ModelEMA {
 public:
  ModelEMA(model::SegmentationModel& source, double decay = 0.9999, double tau = 2000, int64_t updates = 0);

  void update(model::SegmentationModel& source) {
    begin_update();
    blend(source);
  }
  // update() in two parts: the host's update count and this update's decay, uploaded into the
  // device factors; then the device work only (recordable: it reads the factors on the device).
  void begin_update();
  void blend(model::SegmentationModel& source);
  model::SegmentationModel& model() { return ema_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }

 private:
  model::SegmentationModel ema_{nullptr};
  std::vector<torch::Tensor> ema_tensors_;
  double decay_, tau_;
  int64_t updates_;
  torch::Tensor factors_;  // (2,) float32 on the device: d, 1 - d
};

// Float entries of a model's state (parameters and buffers), in state-dict order.
std::vector<torch::Tensor> float_state(model::SegmentationModelImpl& m);

}  // namespace lucid::optim
