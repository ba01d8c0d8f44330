// The training-step unit and its whole-step variant (capture_step) on the CPU: routing of every
// capture_step fallback with its counted reason, the option, and the recordings driven by the eager
// stand-in backend (each recording re-run as a closure behind the same static buffers, warm-up and
// state restoration included), which must give the bytes of native steps: predictions, loss items,
// gradients, parameters, BatchNorm statistics, optimizer state and EMA, over changing instance
// counts, an empty batch, a partial batch and accumulation.
#include <gtest/gtest.h>

#include "lucid/train/train_options.h"
#include "replay_harness.h"

using namespace lucid;
using namespace lucid::replay;
using namespace lucid::replay_harness;

namespace {

ReplayOptions step_only() { return ReplayOptions{false, false, false, true}; }

TEST(StepRoute, ReasonsOfTheWholeStep) {
  for (auto s : {Stage::Step, Stage::StepUpdate}) {
    EXPECT_TRUE(route(s, step_only(), FitFacts{}).replay) << stage_name(s);
    EXPECT_EQ(route(s, ReplayOptions{true, true, true}, FitFacts{}).reason, "replay not requested");
  }
  struct Case {
    const char* reason;
    std::function<void(FitFacts&)> set;
    bool update_native;  // the optimizer-step recording falls back too
  };
  const std::vector<Case> cases = {
      {"the fit runs on the CPU (recordings are CUDA graphs)", [](FitFacts& f) { f.cuda = false; }, true},
      {"more than one GPU", [](FitFacts& f) { f.devices = 2; }, true},
      {"its recording failed", [](FitFacts& f) { f.recording_failed = true; }, true},
      {"autograd anomaly detection is on", [](FitFacts& f) { f.anomaly_detection = true; }, true},
      {"the model is not in training mode", [](FitFacts& f) { f.training = false; }, false},
      {"hooks on the heads", [](FitFacts& f) { f.head_hooks = true; }, false},
      {"recording cap reached (another input signature or capacity bucket)",
       [](FitFacts& f) { f.recordings_full = true; }, false},
  };
  for (const auto& c : cases) {
    FitFacts f;
    c.set(f);
    auto r = route(Stage::Step, step_only(), f);
    EXPECT_FALSE(r.replay) << c.reason;
    EXPECT_EQ(r.reason, c.reason);
    EXPECT_EQ(route(Stage::StepUpdate, step_only(), f).replay, !c.update_native) << c.reason;
  }
  // The micro-step recording does not depend on the accumulation count, and frozen layers only
  // shrink the set of parameters the backward is taken for.
  FitFacts f;
  f.accumulation_fixed = false;
  f.shared_frozen = f.heads_frozen = true;
  EXPECT_TRUE(route(Stage::Step, step_only(), f).replay);
  EXPECT_TRUE(route(Stage::StepUpdate, step_only(), f).replay);
  EXPECT_EQ(route_step(Stage::StepUpdate, false).reason, "another set of gradients than the recorded one");
}

TEST(StepOption, CaptureStepIsOnByDefaultUnlessTurnedOffOrStagesAsked) {
  auto step_of = [](std::vector<std::string> args) {
    auto o = engine::train_options();
    o.parse(args);
    return engine::TrainSettings::from(o).execution.replay.step;
  };
  EXPECT_TRUE(step_of({}));
  EXPECT_FALSE(step_of({"capture_step=False"}));
  EXPECT_TRUE(step_of({"capture_step=True"}));
  // Asking for a stage recording chooses the stage recordings; both together when both are named.
  EXPECT_FALSE(step_of({"capture_network=True"}));
  EXPECT_FALSE(step_of({"capture_optimizer=True"}));
  EXPECT_TRUE(step_of({"capture_segment_heads=True", "capture_step=True"}));
  EXPECT_TRUE(engine::execution_option("capture_step"));  // left out of checkpoints, as the stage options
}

TEST(TrainingStep, NativeTwiceIsIdentical) { compare_with_native(std::nullopt, optim::Kind::MuSGD, FitSetup{}); }

TEST(TrainingStep, WholeStepReplayByteIdenticalToNative) {
  for (auto kind : {optim::Kind::MuSGD, optim::Kind::SGD, optim::Kind::AdamW})
    compare_with_native(step_only(), kind, FitSetup{});
}

TEST(TrainingStep, WholeStepAsFitsRunItKeepingNoOutputs) {
  // Fits keep no forward outputs in the recordings; the recordings share one input and one gradient
  // buffer set, across the schedule's capacity buckets and its partial batch.
  FitSetup setup;
  setup.keep_step_outputs = false;
  compare_with_native(step_only(), optim::Kind::MuSGD, setup);
}

TEST(TrainingStep, WholeStepWithStageOptionsToo) {
  compare_with_native(ReplayOptions{true, true, true, true}, optim::Kind::MuSGD, FitSetup{});
}

// Runs the schedule on a native fit and on `fit`, comparing every byte.
void run_against_native(Fit& fit, optim::Kind kind = optim::Kind::MuSGD, FitSetup setup = {}) {
  Fit native(std::nullopt, kind, "", setup);
  expect_fits_match(native, fit, setup.imgsz);
}

TEST(TrainingStep, RecordingCapSendsNewSignaturesNative) {
  FitSetup setup;
  setup.max_step_recordings = 2;
  Fit fit(step_only(), optim::Kind::SGD, "", setup);
  run_against_native(fit, optim::Kind::SGD, setup);
  const auto& log = fit.step_recorder()->log();
  // Keys: (2 images, capacity 4), (2, 0), (2, 8), (1, 1), then (2, 4) again: the first two are
  // recorded, the next two refused, the last replays the first's recording.
  EXPECT_EQ(log.replays(Stage::Step), 3);
  EXPECT_EQ(log.reasons().at("training step: recording cap reached (another input signature or capacity bucket)"), 2);
  // Optimizer steps after a native micro-step still replay: the update reads the gradients wherever
  // they came from.
  EXPECT_EQ(log.replays(Stage::StepUpdate), 4);
  EXPECT_EQ(fit.step_recorder()->summary()["recordings"], 2);
}

TEST(TrainingStep, AKeysFirstUseRunsEagerlyAndItsSecondIsRecorded) {
  // As fits run: keys (2 images, capacity 4), (2, 0), (2, 8), (1, 1), then (2, 4) again. The first
  // four run eagerly, the last is the first key's second use: recorded (without a warm-up pass) and
  // replayed. A second pass over the schedule records the other keys at their second use and
  // replays every step; every byte equals the native fit's throughout.
  FitSetup setup;
  setup.keep_step_outputs = false;
  setup.record_on_second_use = true;
  Fit native(std::nullopt, optim::Kind::MuSGD, "", setup), fit(step_only(), optim::Kind::MuSGD, "", setup);
  expect_fits_match(native, fit, setup.imgsz);
  const std::string first_use =
      "training step: the first use of an input signature or capacity bucket (recorded at its second)";
  const auto& log = fit.step_recorder()->log();
  EXPECT_EQ(log.native(Stage::Step), 4);
  EXPECT_EQ(log.reasons().at(first_use), 4);
  EXPECT_EQ(log.replays(Stage::Step), 1);
  EXPECT_EQ(fit.step_recorder()->summary()["eager_steps"], 4);
  EXPECT_EQ(fit.step_recorder()->summary()["recorded_total"], 1);
  expect_fits_match(native, fit, setup.imgsz);
  EXPECT_EQ(log.reasons().at(first_use), 4);
  EXPECT_EQ(log.replays(Stage::Step), 6);
  EXPECT_EQ(fit.step_recorder()->summary()["recorded_total"], 4);
  EXPECT_EQ(log.replays(Stage::StepUpdate), 8);
}

TEST(TrainingStep, CudaGraphsOnTheCpuFallBackNativelyWithTheirReason) {
  FitSetup setup;
  setup.backend = Backend::CudaGraph;  // a CPU fit asking for CUDA graphs
  Fit fit(step_only(), optim::Kind::MuSGD, "", setup);
  run_against_native(fit, optim::Kind::MuSGD, setup);
  const auto& log = fit.step_recorder()->log();
  EXPECT_EQ(log.replays(Stage::Step), 0);
  EXPECT_EQ(log.reasons().at("training step: the fit runs on the CPU (recordings are CUDA graphs)"), 5);
  EXPECT_EQ(log.reasons().at("optimizer step and EMA: the fit runs on the CPU (recordings are CUDA graphs)"), 4);
  const auto s = fit.step().replay_summary();
  EXPECT_EQ(s["training_step"]["native_steps"], 5);
  EXPECT_EQ(s["native_reasons"].size(), 2u);
}

TEST(TrainingStep, HooksOnTheHeadsKeepTheStepNative) {
  Fit fit(step_only(), optim::Kind::SGD);
  int calls = 0;
  fit.model()->add_head_hook([&](model::HeadOutputs&) { ++calls; });
  auto b = schedule();
  fit.run(b[0].x, b[0].targets, true);
  fit.run(b[2].x, b[2].targets, true);
  EXPECT_EQ(calls, 2);
  const auto& log = fit.step_recorder()->log();
  EXPECT_EQ(log.replays(Stage::Step), 0);
  EXPECT_EQ(log.reasons().at("training step: hooks on the heads"), 2);
  EXPECT_EQ(log.replays(Stage::StepUpdate), 2);
}

TEST(TrainingStep, EpochLossWeightsReplayWithoutReRecordingAndStayIdentical) {
  // The end2end loss weights move once per epoch; they are device tensors the recordings read, so
  // the recordings made in the first epoch replay in the next with the new weights, giving the bytes
  // of native steps.
  Fit native(std::nullopt), fit(step_only());
  auto b = schedule();
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i : {0, 2}) {
      auto x = native.run(b[i].x, b[i].targets, true), y = fit.run(b[i].x, b[i].targets, true);
      expect_same_bytes(x.predictions, y.predictions, c10::str("loss at epoch ", epoch));
      expect_same_bytes(x.params, y.params, c10::str("parameters at epoch ", epoch));
      expect_same_bytes(x.ema, y.ema, c10::str("EMA at epoch ", epoch));
    }
    native.loss().update_epoch();
    fit.loss().update_epoch();
  }
  EXPECT_NE(native.loss().one2many_weight(), 0.8);
  const auto s = fit.step_recorder()->summary();
  EXPECT_EQ(s["recorded_total"], 2);
  EXPECT_EQ(s["recordings"], 2);
  EXPECT_EQ(s["replayed_steps"], 4);
}

}  // namespace

// The step owns the accumulation boundary: with 2 micro-steps per update and the last optimizer step
// at -1 (a fresh run), iterations 1, 3 and 5 close an accumulation (ni - last_opt_step >= 2, the
// reference's rule), step the optimizer and move last_opt_step; the others only accumulate, leaving
// the parameters as they were.
TEST(TrainingStep, TheStepOwnsTheAccumulationBoundary) {
  FitSetup setup;
  setup.loss = simple_loss_fns();
  Fit fit(std::nullopt, optim::Kind::SGD, "", setup);
  const auto batches = schedule();
  int64_t last_opt_step = -1;
  for (int64_t ni = 0; ni < 6; ++ni) {
    const auto& b = batches[static_cast<size_t>(ni) % batches.size()];
    std::vector<Tensor> before;
    for (const auto& p : fit.model()->parameters()) before.push_back(p.detach().clone());
    const auto it = fit.step().train(b.x, b.targets, ni, {2, true, last_opt_step});
    const bool boundary = ni % 2 == 1;
    EXPECT_EQ(it.optimizer_stepped, boundary) << "iteration " << ni;
    EXPECT_EQ(last_opt_step, boundary ? ni : ni - 1) << "iteration " << ni;
    EXPECT_TRUE(it.loss.items.defined());
    bool unchanged = true;
    size_t i = 0;
    for (const auto& p : fit.model()->parameters()) unchanged = unchanged && torch::equal(p, before[i++]);
    EXPECT_EQ(unchanged, !boundary) << "iteration " << ni;
  }
}
