// Stage replay on the CPU: routing of every fallback condition, and the recorder driven by the
// eager stand-in backend (recordings re-run as closures with the static-buffer contract), which
// must give the same bytes as native execution for predictions, gradients, parameters, BatchNorm
// statistics and optimizer state. The CUDA-graph backend is tested the same way in gpu_tests.
#include <gtest/gtest.h>

#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"
#include "lucid/replay/recorder.h"
#include "replay_harness.h"

using namespace lucid;
using namespace lucid::replay;
using torch::Tensor;

namespace {

ReplayOptions all_on() { return ReplayOptions{true, true, true}; }

TEST(ReplayRoute, DefaultIsOff) {
  ReplayOptions none;
  EXPECT_FALSE(none.any());
  for (auto s : {Stage::SharedFeatures, Stage::Heads, Stage::Optimizer}) {
    auto r = route(s, none, FitFacts{});
    EXPECT_FALSE(r.replay);
    EXPECT_EQ(r.reason, "replay not requested");
  }
}

TEST(ReplayRoute, AllConditionsHoldReplays) {
  for (auto s : {Stage::SharedFeatures, Stage::Heads, Stage::Optimizer}) {
    auto r = route(s, all_on(), FitFacts{});
    EXPECT_TRUE(r.replay) << stage_name(s);
    EXPECT_EQ(r.reason, "");
  }
}

TEST(ReplayRoute, EachFallbackConditionSelectsNativeWithItsReason) {
  struct Case {
    const char* reason;
    std::function<void(FitFacts&)> set;
    std::vector<Stage> stages;  // stages the condition sends native
  };
  const std::vector<Stage> all = {Stage::SharedFeatures, Stage::Heads, Stage::Optimizer};
  const std::vector<Case> cases = {
      {"the fit runs on the CPU (recordings are CUDA graphs)", [](FitFacts& f) { f.cuda = false; }, all},
      {"more than one GPU", [](FitFacts& f) { f.devices = 2; }, all},
      {"gradient accumulation still changes (warmup)", [](FitFacts& f) { f.accumulation_fixed = false; }, all},
      {"its recording failed", [](FitFacts& f) { f.recording_failed = true; }, all},
      {"autograd anomaly detection is on", [](FitFacts& f) { f.anomaly_detection = true; }, all},
      {"the model is not in training mode",
       [](FitFacts& f) { f.training = false; },
       {Stage::SharedFeatures, Stage::Heads}},
      {"frozen shared features", [](FitFacts& f) { f.shared_frozen = true; }, {Stage::SharedFeatures}},
      {"frozen head parameters", [](FitFacts& f) { f.heads_frozen = true; }, {Stage::Heads}},
      {"hooks on the heads", [](FitFacts& f) { f.head_hooks = true; }, {Stage::Heads}},
      {"altered head topology or dispatch", [](FitFacts& f) { f.head_topology_stock = false; }, {Stage::Heads}},
  };
  for (const auto& c : cases) {
    FitFacts f;
    c.set(f);
    for (auto s : all) {
      auto r = route(s, all_on(), f);
      const bool native = std::find(c.stages.begin(), c.stages.end(), s) != c.stages.end();
      EXPECT_EQ(r.replay, !native) << c.reason << " / " << stage_name(s);
      if (native) {
        EXPECT_EQ(r.reason, c.reason);
      }
    }
  }
}

TEST(ReplayRoute, OptionsCombineFreely) {
  for (int mask = 0; mask < 8; ++mask) {
    ReplayOptions o{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    EXPECT_EQ(route(Stage::SharedFeatures, o, {}).replay, o.network);
    EXPECT_EQ(route(Stage::Heads, o, {}).replay, o.heads);
    EXPECT_EQ(route(Stage::Optimizer, o, {}).replay, o.optimizer);
  }
}

TEST(ReplayRoute, PartialBatchRunsNativelyAndLogIsCounted) {
  auto r = route_step(Stage::SharedFeatures, false);
  EXPECT_FALSE(r.replay);
  EXPECT_EQ(r.reason, "input signature differs from the recorded one (partial batch)");
  RouteLog log(false);
  log.record(Stage::Heads, r);
  log.record(Stage::Heads, r);
  log.record(Stage::Heads, Route{true, ""});
  EXPECT_EQ(log.native(Stage::Heads), 2);
  EXPECT_EQ(log.replays(Stage::Heads), 1);
  EXPECT_EQ(log.reasons().at("head predictions: " + r.reason), 2);
}

// --- graphed callables through the eager stand-in ---------------------------------------------

TEST(GraphedCallable, ParametersInTensorListGetGradientsAndUnusedOutputsNone) {
  torch::manual_seed(0);
  auto w1 = torch::randn({3, 3}, torch::requires_grad());
  auto w2 = torch::randn({3, 3}, torch::requires_grad());
  auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].matmul(w1), in[0].matmul(w2)}; };
  RecordingContext ctx(Backend::Eager);
  GraphedCallable g("pair", fn, {w1, w2});
  auto x = torch::randn({2, 3}, torch::requires_grad());
  g.set_inputs({x}, {true}, false);
  g.capture_forward(ctx);
  g.capture_backward(ctx);
  ASSERT_TRUE(g.matches({x}));
  EXPECT_FALSE(g.matches({torch::randn({1, 3})}));

  // Only the first output reaches the loss: both parameters receive a gradient (one zero), as a
  // single node, and the input gradient equals the native one.
  auto out = g({x});
  out[0].sum().backward();
  auto gx = x.grad().clone(), g1 = w1.grad().clone();
  ASSERT_TRUE(w2.grad().defined());
  EXPECT_TRUE(torch::equal(w2.grad(), torch::zeros_like(w2)));
  x.mutable_grad() = Tensor();
  w1.mutable_grad() = Tensor();
  w2.mutable_grad() = Tensor();
  fn({x})[0].sum().backward();
  EXPECT_TRUE(torch::equal(gx, x.grad()));
  EXPECT_TRUE(torch::equal(g1, w1.grad()));
  EXPECT_FALSE(w2.grad().defined());
}

TEST(GraphedCallable, GradientsAccumulateWithoutAliasingAndAnUnusedCallableLeavesNone) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  RecordingContext ctx_w(Backend::Eager), ctx_v(Backend::Eager);
  GraphedCallable used("used", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w}; }, {w});
  GraphedCallable unused("unused", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * v}; }, {v});
  auto x = torch::tensor({1.0f, 2.0f});
  for (auto* g : {&used, &unused}) g->set_inputs({x}, {false}, false);
  used.capture_forward(ctx_w);
  used.capture_backward(ctx_w);
  unused.capture_forward(ctx_v);
  unused.capture_backward(ctx_v);
  // Two micro-batches accumulate into w.grad: the second replay must not overwrite the first.
  used({x})[0].sum().backward();
  used({x * 3})[0].sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({4.0f, 8.0f})));
  // A recording whose outputs the loss ignores never runs its backward: no gradient, as natively.
  auto ignored = unused({x})[0];
  (void)ignored;
  EXPECT_FALSE(v.grad().defined());
  // A backward whose activations a later forward replay overwrote is refused.
  auto first = used({x})[0];
  auto second = used({x * 2})[0];
  (void)second;
  EXPECT_THROW(first.sum().backward(), std::exception);
}

TEST(GraphedCallable, SharedPoolReplaysFollowCaptureOrder) {
  // Recordings of one context share its pool, so the context refuses replays out of capture order.
  auto w = torch::full({2}, 2.0f, torch::requires_grad());
  auto v = torch::full({2}, 3.0f, torch::requires_grad());
  RecordingContext ctx(Backend::Eager);
  GraphedCallable a("a", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w}; }, {w});
  GraphedCallable b("b", [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * v}; }, {v});
  auto x = torch::tensor({1.0f, 2.0f});
  a.set_inputs({x}, {false}, false);
  a.capture_forward(ctx);
  b.set_inputs(a.static_outputs(), {true}, true);
  b.capture_forward(ctx);
  b.capture_backward(ctx);
  a.capture_backward(ctx);

  // Autograd runs the nodes in capture order (b's backward, then a's), chained or side by side.
  auto ya = a({x})[0];
  auto yb = b({ya})[0];
  (yb.sum() + ya.sum()).backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({4.0f, 8.0f})));  // x (v + 1)
  EXPECT_TRUE(torch::equal(v.grad(), torch::tensor({2.0f, 4.0f})));  // x w
  // b's backward may be skipped (an output the loss ignores).
  ya = a({x})[0];
  yb = b({ya})[0];
  ya.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({5.0f, 10.0f})));
  // a's backward before b's: b's would follow a later-captured one's.
  ya = a({x})[0];
  yb = b({ya.detach()})[0];
  ya.sum().backward();
  EXPECT_THROW(yb.sum().backward(), std::logic_error);
  // A forward out of order, and a backward before the forward sequence is complete.
  EXPECT_THROW(b({x}), std::logic_error);
  ya = a({x})[0];
  EXPECT_THROW(ya.sum().backward(), std::logic_error);
  // A recording outside the sequence (the optimizer's) closes the step.
  ya = a({x})[0];
  yb = b({ya})[0];
  ctx.replaying_other();
  EXPECT_THROW(yb.sum().backward(), std::logic_error);
}

// --- the recorder on yolo26n-seg, eager stand-in against native ---------------------------------

using namespace lucid::replay_harness;

void compare_fits(ReplayOptions options, optim::Kind kind = optim::Kind::MuSGD) {
  compare_with_native(options, kind, FitSetup{});
}

TEST(StageRecorder, AllStagesReplayByteIdenticalToNative) { compare_fits(all_on()); }
TEST(StageRecorder, SharedFeaturesAlone) { compare_fits(ReplayOptions{true, false, false}, optim::Kind::SGD); }
TEST(StageRecorder, HeadPredictionsAlone) { compare_fits(ReplayOptions{false, true, false}, optim::Kind::SGD); }
TEST(StageRecorder, OptimizerAloneSgdAndAdamW) {
  compare_fits(ReplayOptions{false, false, true}, optim::Kind::SGD);
  compare_fits(ReplayOptions{false, false, true}, optim::Kind::AdamW);
}

TEST(StageRecorder, HooksOnTheHeadsKeepThemNative) {
  Fit fit(all_on(), optim::Kind::SGD);
  int calls = 0;
  fit.model()->add_head_hook([&](model::HeadOutputs&) { ++calls; });
  auto b = schedule();
  fit.run(b[0].x, b[0].targets, true);
  fit.run(b[2].x, b[2].targets, true);
  EXPECT_EQ(calls, 2);
  const auto& log = fit.recorder()->log();
  EXPECT_EQ(log.replays(Stage::Heads), 0);
  EXPECT_EQ(log.reasons().at("head predictions: hooks on the heads"), 2);
  EXPECT_EQ(log.replays(Stage::SharedFeatures), 2);
}

TEST(StageRecorder, FrozenSharedFeaturesRunNatively) {
  Fit fit(all_on(), optim::Kind::SGD, "model.0.");
  auto b = schedule();
  fit.run(b[0].x, b[0].targets, true);
  const auto& log = fit.recorder()->log();
  EXPECT_EQ(log.replays(Stage::SharedFeatures), 0);
  EXPECT_EQ(log.reasons().at("shared features: frozen shared features"), 1);
  EXPECT_EQ(log.replays(Stage::Heads), 1);
}

TEST(StageRecorder, WarmupAccumulationRunsNativelyThenRecords) {
  Fit fit(all_on(), optim::Kind::SGD);
  auto b = schedule();
  fit.recorder()->set_accumulation_fixed(false);
  fit.run(b[0].x, b[0].targets, true);
  EXPECT_FALSE(fit.recorder()->network_recorded());
  fit.recorder()->set_accumulation_fixed(true);
  fit.run(b[2].x, b[2].targets, true);
  EXPECT_TRUE(fit.recorder()->network_recorded());
  EXPECT_TRUE(fit.recorder()->optimizer_recorded());
  EXPECT_EQ(fit.recorder()->log().replays(Stage::Optimizer), 1);
  const auto& log = fit.recorder()->log();
  EXPECT_EQ(log.reasons().at("optimizer stages: gradient accumulation still changes (warmup)"), 1);
  auto s = fit.recorder()->summary();
  EXPECT_EQ(s["shared_features"]["replayed_steps"], 1);
  EXPECT_EQ(s["shared_features"]["native_steps"], 1);
}

}  // namespace
