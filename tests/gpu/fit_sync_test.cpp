// Host synchronisations of the training step (CUDA sync debug mode set to error), through the
// training-step unit Trainer::fit() runs:
//   - natively, the forward, backward, gradient clipping, optimizer stages and EMA update with a
//     trivial loss in place of the segmentation loss: none of them synchronises;
//   - with capture_step, replayed steps (micro-steps, accumulation and the optimizer step with the
//     EMA) of the real loss: not a single synchronisation.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "replay_harness.h"

using namespace lucid;

namespace {

torch::Tensor trivial_loss(const model::HeadOutputs& o) {
  auto l = o.one2many.scores.to(torch::kFloat).sigmoid().mean() + o.one2many.proto.to(torch::kFloat).pow(2).mean() +
           o.one2many.mask_coefficient.to(torch::kFloat).mean() + o.one2many.boxes.to(torch::kFloat).abs().mean();
  if (o.one2many.semantic.defined()) l = l + o.one2many.semantic.to(torch::kFloat).mean();
  if (o.one2one) l = l + o.one2one->scores.to(torch::kFloat).mean();
  return l;
}

// Runs fn with sync debug mode at error; a synchronisation fails the test with its message.
void without_syncs(const std::string& what, const std::function<void()>& fn) {
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  try {
    fn();
  } catch (const std::exception& e) {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    FAIL() << what << ": a host synchronisation: " << e.what();
  }
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
}

TEST(FitGpu, StepStagesDoNotSynchronise) {
  for (const auto kind : {optim::Kind::MuSGD, optim::Kind::SGD, optim::Kind::AdamW}) {
    torch::manual_seed(0);
    model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml"));
    m->to(torch::kCUDA);
    model::use_channels_last(*m);
    m->train();
    optim::Optimizer opt(kind, optim::build_param_groups(*m, kind, 0.01, 0.937, 5e-4));
    optim::ModelEMA ema(m);
    loss::SegmentationLoss loss(loss::loss_options_for(*m));
    engine::StepSettings settings;
    settings.device = torch::Device(torch::kCUDA, 0);
    settings.autocast = true;
    engine::TrainingStep unit(m, loss, opt, &ema, settings);
    auto x = torch::rand({4, 3, 320, 320}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
    auto step = [&](int i) {
      unit.backward(trivial_loss(unit.forward(x)));
      for (size_t g = 0; g < opt.groups().size(); ++g) opt.set_hyper(g, 0.01 * (i + 1), 0.9);
      unit.optimizer_step();
    };
    step(0);  // first use: library handles and workspaces
    without_syncs(optim::kind_name(kind), [&] {
      step(1);
      step(2);
    });
    torch::cuda::synchronize();
    for (const auto& p : m->parameters()) ASSERT_TRUE(torch::isfinite(p).all().item<bool>());
  }
}

// Records b[0]'s signature and the optimizer step, then replays micro-steps (assignment, then
// accumulation) and optimizer steps under sync debug mode error.
void replayed_steps_do_not_synchronise(std::optional<engine::StepLossFns> loss) {
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  replay_harness::FitSetup setup;
  setup.device = torch::Device(torch::kCUDA, 0);
  setup.backend = replay::Backend::CudaGraph;
  setup.autocast = true;
  setup.imgsz = 256;
  setup.loss = std::move(loss);
  replay_harness::Fit fit(replay::ReplayOptions{false, false, false, true}, optim::Kind::MuSGD, "", setup);
  auto b = replay_harness::schedule(setup.imgsz);
  fit.run(b[0].x, b[0].targets, true);
  auto x = b[0].x.to(setup.device).contiguous(at::MemoryFormat::ChannelsLast);
  auto targets = b[0].targets;
  for (auto* t : {&targets.batch_idx, &targets.cls, &targets.bboxes, &targets.masks, &targets.sem_masks})
    *t = t->pin_memory();
  torch::cuda::synchronize();
  without_syncs("replayed training step", [&] {
    for (int i = 0; i < 3; ++i) {
      fit.step().micro_step(x, targets);
      fit.step().micro_step(x, targets);
      fit.step().optimizer_step();
    }
  });
  const auto& log = fit.step_recorder()->log();
  EXPECT_EQ(log.replays(replay::Stage::Step), 7) << nlohmann::ordered_json(log.reasons()).dump();
  EXPECT_EQ(log.replays(replay::Stage::StepUpdate), 4) << nlohmann::ordered_json(log.reasons()).dump();
}

// The step around the loss (forward, backward, accumulation, clipping, optimizer, EMA).
TEST(FitGpu, ReplayedStepsAroundAStandInLossDoNotSynchronise) {
  replayed_steps_do_not_synchronise(replay_harness::simple_loss_fns());
}

// The whole step with the segmentation loss: it needs the loss free of host reads.
TEST(FitGpu, ReplayedWholeStepsDoNotSynchronise) { replayed_steps_do_not_synchronise(std::nullopt); }

}  // namespace
