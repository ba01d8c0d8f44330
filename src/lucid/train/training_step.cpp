#include "lucid/train/training_step.h"

#include <ATen/cuda/CUDAEvent.h>

#include "lucid/data/network_input.h"
#include "lucid/util/device.h"
#include "lucid/util/trace.h"

namespace lucid::engine {

TrainingStep::TrainingStep(model::SegmentationModel model, loss::SegmentationLoss& loss, optim::Optimizer& optimizer,
                           optim::ModelEMA* ema, StepSettings settings)
    : TrainingStep(
          std::move(model),
          StepLossFns{
              [&loss](const loss::SegTargets& t, int64_t b, double h, double w) { return loss.pad(t, b, h, w); },
              [&loss](const model::HeadOutputs& out, const loss::PaddedTargets& t) { return loss(out, t); }},
          optimizer, ema, settings) {}

TrainingStep::TrainingStep(model::SegmentationModel model, StepLossFns loss, optim::Optimizer& optimizer,
                           optim::ModelEMA* ema, StepSettings settings)
    : model_(std::move(model)), loss_(std::move(loss)), optimizer_(optimizer), ema_(ema), s_(settings) {
  for (const auto& p : model_->parameters())
    if (p.requires_grad()) params_.push_back(p);
  if (s_.replay.stages())
    stages_ = std::make_unique<replay::StageRecorder>(*model_, optimizer_, s_.replay, s_.backend, s_.print);
  if (s_.replay.step) {
    replay::StepProgram program;
    // The recording runs the native forward: stage recordings cannot nest inside it.
    program.forward_loss = [this](const torch::Tensor& x, const loss::PaddedTargets& targets) {
      auto out = native_forward(x);
      util::TraceRange range("loss");
      auto result = loss_.loss(out, targets);
      return std::make_pair(std::move(out), std::move(result));
    };
    program.update = [this] { update(); };
    whole_ = std::make_unique<replay::StepRecorder>(std::move(program), model_, optimizer_, ema_, s_.backend,
                                                    s_.max_step_recordings, s_.keep_step_outputs, s_.print,
                                                    s_.record_on_second_use);
  }
}

TrainingStep::~TrainingStep() = default;

torch::Tensor TrainingStep::input(const torch::Tensor& images, const torch::Tensor& hsv_gains) {
  util::TraceRange range("upload");
  const auto gains = s_.hsv ? hsv_gains : torch::Tensor();
  if (!s_.device.is_cuda() || images.device() == s_.device)  // the CPU, or gpu_augment's device batches
    return data::network_input(loss::upload(images, s_.device), gains);
  if (!upload_) upload_ = std::make_unique<BatchUpload>(s_.device);
  torch::Tensor into;
  if (whole_ && s_.input_into_recording) {
    const std::vector<int64_t> sizes{images.size(0), 3, images.size(2), images.size(3)};
    into = whole_->input_buffer(sizes, c10::get_channels_last_strides_2d(sizes),
                                torch::TensorOptions().dtype(torch::kFloat).device(s_.device));
  }
  // Device HSV where the batch carries gains; one fused kernel, which reads the upload once.
  auto x = data::network_input((*upload_)(images), gains, into);
  upload_->read();
  return x;
}

TrainingStep::Iteration TrainingStep::train(const torch::Tensor& x, const loss::SegTargets& targets, int64_t ni,
                                            Accumulation acc) {
  set_accumulation_fixed(acc.fixed);
  Iteration it;
  it.optimizer_stepped = ni - acc.last_opt_step >= acc.accumulate;
  if (s_.before_micro_step) s_.before_micro_step(it.optimizer_stepped);
  it.loss = micro_step(x, targets);
  if (it.optimizer_stepped) {
    optimizer_step();
    acc.last_opt_step = ni;
  }
  return it;
}

void TrainingStep::set_accumulation_fixed(bool fixed) {
  if (stages_) stages_->set_accumulation_fixed(fixed);
}

model::HeadOutputs TrainingStep::forward(const torch::Tensor& x) {
  if (!stages_) return native_forward(x);
  util::Autocast autocast(s_.autocast);
  return stages_->forward(x);
}

model::HeadOutputs TrainingStep::native_forward(const torch::Tensor& x) {
  util::Autocast autocast(s_.autocast);
  util::TraceRange range("forward");
  return model_->forward(x);
}

void TrainingStep::backward(const torch::Tensor& total) {
  util::TraceRange range("backward");
  util::Autocast autocast_off(false);
  total.backward();
}

StepLoss TrainingStep::micro_step(const torch::Tensor& x, const loss::SegTargets& targets) {
  // The targets padded to their capacity bucket on the host, before upload: replayed and native
  // steps compute the loss on the same padded targets.
  loss::PaddedTargets padded;
  {
    util::TraceRange range("pad targets");
    padded = loss_.pad(targets, x.size(0), static_cast<double>(x.size(2)), static_cast<double>(x.size(3)));
  }
  if (whole_) {
    util::TraceRange range("training step replay");
    if (auto replayed = whole_->micro_step(x, padded)) return {std::move(replayed->outputs), replayed->items};
  }
  auto out = forward(x);
  loss::LossResult result;
  {
    util::TraceRange range("loss");
    result = loss_.loss(out, loss::upload(padded, s_.device));
  }
  backward(result.total.sum());
  return {std::move(out), result.items};
}

void TrainingStep::reduce_gradients() {
  if (!s_.reduce_gradients) return;
  util::TraceRange range("all-reduce gradients");
  s_.reduce_gradients();
}

void TrainingStep::update() {
  reduce_gradients();
  {
    util::TraceRange range("clip gradients");
    optim::clip_grad_norm(params_, s_.max_grad_norm);
  }
  {
    util::TraceRange range("optimizer prepare");
    optimizer_.prepare_update();
  }
  {
    util::TraceRange range("optimizer orthogonalize");
    optimizer_.orthogonalize();
  }
  {
    util::TraceRange range("optimizer apply");
    optimizer_.apply_update();
  }
  if (ema_) {
    util::TraceRange range("EMA");
    ema_->blend(model_);
  }
}

void TrainingStep::native_optimizer_step() {
  reduce_gradients();
  {
    util::TraceRange range("clip gradients");
    optim::clip_grad_norm(params_, s_.max_grad_norm);
  }
  if (stages_)
    stages_->optimizer_step();
  else
    optimizer_.step();
  optimizer_.zero_grad();
  if (ema_) {
    util::TraceRange range("EMA");
    ema_->update(model_);
  }
}

void TrainingStep::optimizer_step() {
  if (whole_) {
    util::TraceRange range("optimizer step replay");
    if (whole_->optimizer_step()) return;
  }
  native_optimizer_step();
}

void TrainingStep::beside_steps(const std::function<void()>& fn) {
  if (whole_)
    whole_->beside_recordings(fn);
  else
    fn();
}

nlohmann::ordered_json TrainingStep::replay_summary() const {
  auto j = stages_ ? stages_->summary() : nlohmann::ordered_json::object();
  if (!whole_) return j;
  j["training_step"] = whole_->summary();
  auto reasons = j.contains("native_reasons") ? j["native_reasons"] : nlohmann::ordered_json::object();
  for (const auto& [k, v] : whole_->log().reasons()) reasons[k] = v;
  j["native_reasons"] = reasons;
  return j;
}

struct LossItemsReader::Pending {
  torch::Tensor host;  // pinned (5) float32
  at::cuda::CUDAEvent copied;
  Step info{};
  bool active = false;
};

LossItemsReader::LossItemsReader(const torch::Device& device) : cuda_(device.is_cuda()) {
  if (!cuda_) return;
  pending_ = std::make_shared<Pending>();
  pending_->host = torch::empty({loss::kLossTerms}, torch::kFloat).pin_memory();
}

namespace {

void read_into(LossItemsReader::Step& step, const torch::Tensor& host) {
  const float* v = host.data_ptr<float>();
  for (int k = 0; k < loss::kLossTerms; ++k) step.items[static_cast<size_t>(k)] = v[k];
}

}  // namespace

std::optional<LossItemsReader::Step> LossItemsReader::push(const torch::Tensor& items, Step info) {
  if (!cuda_) {
    read_into(info, items.detach().to(torch::kCPU, torch::kFloat).contiguous());
    return info;
  }
  auto previous = drain();
  pending_->host.copy_(items.detach().to(torch::kFloat), /*non_blocking=*/true);
  pending_->copied.record();
  pending_->info = info;
  pending_->active = true;
  return previous;
}

std::optional<LossItemsReader::Step> LossItemsReader::drain() {
  if (!cuda_ || !pending_->active) return std::nullopt;
  pending_->copied.synchronize();
  pending_->active = false;
  read_into(pending_->info, pending_->host);
  return pending_->info;
}

}  // namespace lucid::engine
