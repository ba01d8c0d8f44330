// The fixture shared by the CPU and GPU tests of stage replay: a small yolo26n-seg fit (3 classes,
// 64 px; on the CPU at half of yolo26n's width) run natively and with stage replay over batches of
// changing instance counts, one batch without instances, a partial batch and gradient accumulation, compared byte for
// byte after every batch: predictions, loss items, gradients and their definedness, parameters, BatchNorm statistics
// and optimizer state.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "lucid/train/training_step.h"

namespace lucid::replay_harness {

using namespace lucid::replay;
using torch::Tensor;

inline loss::SegTargets make_targets(const std::vector<int>& counts, int64_t size, int64_t nc) {
  const int64_t b = static_cast<int64_t>(counts.size()), hm = size / 4;
  std::vector<float> idx, cls, boxes;
  auto masks = torch::zeros({b, hm, hm}, torch::kLong);
  auto sem = torch::zeros({b, hm, hm}, torch::kLong);
  for (int64_t i = 0; i < b; ++i)
    for (int j = 0; j < counts[static_cast<size_t>(i)]; ++j) {
      // Larger instances first (overlap masks are in area-descending order).
      const float w = 0.6f - 0.08f * static_cast<float>(j), cx = 0.3f + 0.07f * static_cast<float>(j + i),
                  cy = 0.5f - 0.05f * static_cast<float>(j);
      idx.push_back(static_cast<float>(i));
      cls.push_back(static_cast<float>((i + j) % nc));
      for (float v : {cx, cy, w, w * 0.8f}) boxes.push_back(v);
      const auto x0 = static_cast<int64_t>((cx - w / 2) * hm), x1 = static_cast<int64_t>((cx + w / 2) * hm);
      const auto y0 = static_cast<int64_t>((cy - w * 0.4f) * hm), y1 = static_cast<int64_t>((cy + w * 0.4f) * hm);
      masks[i]
          .slice(0, std::max<int64_t>(y0, 0), std::min(y1, hm))
          .slice(1, std::max<int64_t>(x0, 0), std::min(x1, hm))
          .fill_(j + 1);
      sem[i]
          .slice(0, std::max<int64_t>(y0, 0), std::min(y1, hm))
          .slice(1, std::max<int64_t>(x0, 0), std::min(x1, hm))
          .fill_((i + j) % nc);
    }
  loss::SegTargets t;
  const auto n = static_cast<int64_t>(idx.size());
  t.batch_idx = torch::tensor(idx).view({n});
  t.cls = torch::tensor(cls).view({n});
  t.bboxes = torch::tensor(boxes).view({n, 4});
  t.masks = masks;
  t.sem_masks = sem;
  return t;
}

// Everything a step leaves behind, as raw bytes.
struct StepRecord {
  std::vector<Tensor> predictions, grads, params, buffers, optimizer, ema;
  std::vector<bool> grad_defined;
};

inline void expect_same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " " << i;
    if (!a[i].defined()) continue;
    ASSERT_EQ(a[i].sizes(), b[i].sizes()) << what << " " << i;
    auto x = a[i].contiguous().cpu(), y = b[i].contiguous().cpu();
    EXPECT_EQ(0, std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes())) << what << " " << i << " differs";
  }
}

// A stand-in loss (where the rest of the step is checked on its own): five terms of the predictions,
// the fifth shifted by the mean padded target box, so the targets staged into a recording's buffers
// take part; the targets padded as the segmentation loss pads them.
inline loss::LossResult simple_loss(const model::HeadOutputs& o, const loss::PaddedTargets& t) {
  auto boxes = t.boxes.to(torch::kFloat).mean();
  std::vector<Tensor> terms = {
      o.one2many.scores.to(torch::kFloat).sigmoid().mean(), o.one2many.proto.to(torch::kFloat).pow(2).mean(),
      o.one2many.mask_coefficient.to(torch::kFloat).mean(), o.one2many.boxes.to(torch::kFloat).abs().mean(),
      o.one2one->scores.to(torch::kFloat).mean() + boxes};
  loss::LossResult r;
  r.total = torch::stack(terms);
  r.items = r.total.detach();
  return r;
}

inline engine::StepLossFns simple_loss_fns() {
  return {[](const loss::SegTargets& t, int64_t b, double h, double w) { return loss::pad_targets(t, b, h, w, true); },
          simple_loss};
}

// Where and how the fits run: the CPU with the eager stand-in, or CUDA graphs with channels_last
// and BF16 autocast as `lucid train` runs on a GPU.
struct FitSetup {
  torch::Device device{torch::kCPU};
  Backend backend = Backend::Eager;
  bool autocast = false;
  int64_t imgsz = 64;
  int64_t max_step_recordings = 8;
  bool keep_step_outputs = true;            // false: as fits run, only the loss items are compared of the forward
  bool record_on_second_use = false;        // true: as fits run, a key's first use runs eagerly
  std::optional<engine::StepLossFns> loss;  // none: the segmentation loss
};

// A fit through the training-step unit (train/training_step.h), as Trainer::fit() runs it.
class Fit {
 public:
  Fit(std::optional<ReplayOptions> replay, optim::Kind kind = optim::Kind::MuSGD, const std::string& freeze = "",
      FitSetup setup = {})
      : setup_(setup), model_(nullptr) {
    torch::manual_seed(0);
    auto spec = config::load_model_spec("yolo26n-seg.yaml", 3);
    // On the CPU, yolo26n's layers at half its width: what these fits compare (native against
    // recorded steps, byte for byte) does not depend on the width, and MuSGD's Newton-Schulz
    // iterations run in BF16, which the CPU multiplies without a fast kernel, at a cost of about the
    // cube of the width. The GPU tests train yolo26n itself.
    if (!setup_.device.is_cuda()) spec.width /= 2;
    model_ = model::SegmentationModel(spec);
    model_->to(setup_.device);
    if (setup_.device.is_cuda()) model::use_channels_last(*model_);
    model_->train();
    if (!freeze.empty())
      for (auto& p : model_->named_parameters())
        if (p.key().rfind(freeze, 0) == 0) p.value().set_requires_grad(false);
    optimizer_ = std::make_unique<optim::Optimizer>(kind, optim::build_param_groups(*model_, kind, 0.01, 0.9, 5e-4));
    for (size_t g = 0; g < optimizer_->groups().size(); ++g) optimizer_->set_hyper(g, 0.01, 0.9);
    loss::LossOptions lo;
    lo.epochs = 2;
    loss_ = std::make_unique<loss::SegmentationLoss>(loss::loss_options_for(*model_, lo));
    ema_ = std::make_unique<optim::ModelEMA>(model_);
    engine::StepSettings s;
    s.device = setup_.device;
    s.autocast = setup_.autocast;
    if (replay) s.replay = *replay;
    s.backend = setup_.backend;
    s.max_step_recordings = setup_.max_step_recordings;
    s.keep_step_outputs = setup_.keep_step_outputs;
    s.record_on_second_use = setup_.record_on_second_use;
    s.print = false;
    if (setup_.loss)
      step_ = std::make_unique<engine::TrainingStep>(model_, *setup_.loss, *optimizer_, ema_.get(), s);
    else
      step_ = std::make_unique<engine::TrainingStep>(model_, *loss_, *optimizer_, ema_.get(), s);
  }

  // One batch; the optimizer steps when `step` is set (accumulating over the batches before).
  StepRecord run(const Tensor& host_x, const loss::SegTargets& targets, bool step) {
    StepRecord r;
    auto x = host_x.to(setup_.device);
    if (setup_.device.is_cuda()) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    auto result = step_->micro_step(x, targets);
    const auto& out = result.outputs;
    if (setup_.keep_step_outputs)
      for (const auto& t :
           {out.one2many.boxes, out.one2many.scores, out.one2many.mask_coefficient, out.one2many.proto,
            out.one2many.semantic, out.one2one->boxes, out.one2one->scores, out.one2one->mask_coefficient})
        r.predictions.push_back(t.detach().clone());
    r.predictions.push_back(result.items.clone());
    for (const auto& p : model_->parameters()) {
      r.grad_defined.push_back(p.grad().defined());
      r.grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    }
    if (step) step_->optimizer_step();
    for (const auto& p : model_->parameters()) r.params.push_back(p.detach().clone());
    for (const auto& b : model_->buffers()) r.buffers.push_back(b.clone());
    for (const auto& [name, t] : optimizer_->state()) r.optimizer.push_back(t.clone());
    for (const auto& t : optim::float_state(*ema_->model())) r.ema.push_back(t.clone());
    return r;
  }

  model::SegmentationModel& model() { return model_; }
  loss::SegmentationLoss& loss() { return *loss_; }
  StageRecorder* recorder() { return step_->stage_recorder(); }
  StepRecorder* step_recorder() { return step_->step_recorder(); }
  engine::TrainingStep& step() { return *step_; }

 private:
  FitSetup setup_;
  model::SegmentationModel model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<loss::SegmentationLoss> loss_;
  std::unique_ptr<optim::ModelEMA> ema_;
  std::unique_ptr<engine::TrainingStep> step_;
};

struct Batch {
  Tensor x;
  loss::SegTargets targets;
  bool step;
};

// Batches of two with changing instance counts (mask demand), one with no instances at all, a
// partial batch of one, and accumulation over two batches.
inline std::vector<Batch> schedule(int64_t size = 64) {
  torch::manual_seed(1);
  std::vector<Batch> b;
  const std::vector<std::vector<int>> counts = {{3, 1}, {0, 0}, {5, 2}, {1}, {2, 4}};
  const std::vector<bool> steps = {true, false, true, true, true};
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto n = static_cast<int64_t>(counts[i].size());
    b.push_back({torch::rand({n, 3, size, size}), make_targets(counts[i], size, 3), steps[i]});
  }
  return b;
}

// Runs schedule() on `native` and on `other` and compares every byte after every batch.
inline void expect_fits_match(Fit& native, Fit& other, int64_t imgsz) {
  auto batches = schedule(imgsz);
  for (size_t i = 0; i < batches.size(); ++i) {
    auto a = native.run(batches[i].x, batches[i].targets, batches[i].step);
    auto b = other.run(batches[i].x, batches[i].targets, batches[i].step);
    const auto at = " at batch " + std::to_string(i);
    expect_same_bytes(a.predictions, b.predictions, "predictions and loss" + at);
    EXPECT_EQ(a.grad_defined, b.grad_defined) << at;
    expect_same_bytes(a.grads, b.grads, "gradients" + at);
    expect_same_bytes(a.params, b.params, "parameters" + at);
    expect_same_bytes(a.buffers, b.buffers, "BatchNorm statistics" + at);
    expect_same_bytes(a.optimizer, b.optimizer, "optimizer state" + at);
    expect_same_bytes(a.ema, b.ema, "EMA" + at);
  }
}

// Runs schedule() natively and with `options` (nullopt: natively twice, the determinism control)
// and compares every byte after every batch; returns the replayed fit's route log checks.
inline void compare_with_native(std::optional<ReplayOptions> options, optim::Kind kind, FitSetup setup) {
  Fit native(std::nullopt, kind, "", setup), replayed(options, kind, "", setup);
  expect_fits_match(native, replayed, setup.imgsz);
  const auto batches = schedule(setup.imgsz);
  if (!options) return;
  const auto& o = *options;
  if (o.step) {
    // The whole step replayed every batch and every optimizer step; four keys (the last batch's
    // capacity bucket is the first's), within the cap. The stage recordings, if requested too, were
    // never needed.
    const auto& log = replayed.step_recorder()->log();
    EXPECT_EQ(log.replays(Stage::Step), static_cast<int64_t>(batches.size()));
    EXPECT_EQ(replayed.step_recorder()->recordings(), 4);
    EXPECT_EQ(log.replays(Stage::StepUpdate), 4);
    EXPECT_TRUE(log.reasons().empty());
    return;
  }
  // The route assertion: the recorded stages really replayed (4 full batches, 1 partial).
  const auto& log = replayed.recorder()->log();
  if (o.network) {
    EXPECT_EQ(log.replays(Stage::SharedFeatures), 4);
    EXPECT_EQ(log.reasons().at("shared features: input signature differs from the recorded one (partial batch)"), 1);
  }
  if (o.heads) {
    EXPECT_EQ(log.replays(Stage::Heads), 4);
  }
  if (o.optimizer) {
    EXPECT_EQ(log.replays(Stage::Optimizer), 4);
  }
}

}  // namespace lucid::replay_harness
