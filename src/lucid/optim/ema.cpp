#include "lucid/optim/ema.h"

#include <cmath>

namespace lucid::optim {

std::vector<torch::Tensor> float_state(model::SegmentationModelImpl& m) {
  std::vector<torch::Tensor> out;
  for (auto& [name, t] : model::state_dict(m))
    if (t.is_floating_point()) out.push_back(t);
  return out;
}

ModelEMA::ModelEMA(model::SegmentationModel& source, double decay, double tau, int64_t updates)
    : decay_(decay), tau_(tau), updates_(updates) {
  ema_ = model::SegmentationModel(source->spec());
  auto device = source->parameters().front().device();
  ema_->to(device);
  torch::NoGradGuard no_grad;
  auto src = model::state_dict(*source);
  auto dst = model::state_dict(*ema_);
  for (size_t i = 0; i < src.size(); ++i) {
    // The source's layout (channels_last kernels on CUDA): the blend's lists then share strides,
    // which its multi-tensor kernels need; otherwise each tensor runs its own add.
    dst[i].second.set_data(src[i].second.detach().clone());
  }
  for (auto& p : ema_->parameters()) p.set_requires_grad(false);
  ema_->eval();
  ema_tensors_ = float_state(*ema_);
  factors_ = torch::zeros({2}, torch::TensorOptions().dtype(torch::kFloat).device(device));
}

void ModelEMA::begin_update() {
  ++updates_;
  const double d = decay_ * (1 - std::exp(-static_cast<double>(updates_) / tau_));
  auto host = torch::tensor({static_cast<float>(d), static_cast<float>(1 - d)});
  if (factors_.is_cuda()) host = host.pin_memory();
  factors_.copy_(host, /*non_blocking=*/true);
}

void ModelEMA::blend(model::SegmentationModel& source) {
  torch::NoGradGuard no_grad;
  auto src = float_state(*source);
  torch::_foreach_mul_(ema_tensors_, factors_[0]);
  torch::_foreach_add_(ema_tensors_, torch::_foreach_mul(src, factors_[1]));
}

}  // namespace lucid::optim
