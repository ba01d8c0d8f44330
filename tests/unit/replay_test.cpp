// Stage replay on the CPU: routing of every fallback condition, and the recorder driven by the
// eager stand-in backend (recordings re-run as closures with the static-buffer contract), which
// must give the same bytes as native execution for predictions, gradients, parameters, BatchNorm
// statistics and optimizer state. The CUDA-graph backend is tested the same way in gpu_tests.
#include <gtest/gtest.h>

#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"
#include "lucid/replay/recorder.h"

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
      {"the model is not in training mode", [](FitFacts& f) { f.training = false; },
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
      if (native) EXPECT_EQ(r.reason, c.reason);
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

// --- the recorder on yolo26n-seg, eager stand-in against native ---------------------------------

loss::SegTargets make_targets(const std::vector<int>& counts, int64_t size, int64_t nc) {
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
      masks[i].slice(0, std::max<int64_t>(y0, 0), std::min(y1, hm)).slice(1, std::max<int64_t>(x0, 0), std::min(x1, hm)).fill_(j + 1);
      sem[i].slice(0, std::max<int64_t>(y0, 0), std::min(y1, hm)).slice(1, std::max<int64_t>(x0, 0), std::min(x1, hm)).fill_((i + j) % nc);
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
  std::vector<Tensor> predictions, grads, params, buffers, optimizer;
  std::vector<bool> grad_defined;
};

void expect_same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " " << i;
    if (!a[i].defined()) continue;
    ASSERT_EQ(a[i].sizes(), b[i].sizes()) << what << " " << i;
    auto x = a[i].contiguous(), y = b[i].contiguous();
    EXPECT_EQ(0, std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes())) << what << " " << i << " differs";
  }
}

class Fit {
 public:
  Fit(std::optional<ReplayOptions> replay, optim::Kind kind = optim::Kind::MuSGD, const std::string& freeze = "")
      : model_(nullptr) {
    torch::manual_seed(0);
    model_ = model::SegmentationModel(config::load_model_spec("yolo26n-seg.yaml", 3));
    model_->train();
    if (!freeze.empty())
      for (auto& p : model_->named_parameters())
        if (p.key().rfind(freeze, 0) == 0) p.value().set_requires_grad(false);
    optimizer_ = std::make_unique<optim::Optimizer>(kind, optim::build_param_groups(*model_, kind, 0.01, 0.9, 5e-4));
    for (size_t g = 0; g < optimizer_->groups().size(); ++g) optimizer_->set_hyper(g, 0.01, 0.9);
    loss::LossOptions lo;
    lo.epochs = 2;
    loss_ = std::make_unique<loss::SegmentationLoss>(loss::loss_options_for(*model_, lo));
    if (replay) recorder_ = std::make_unique<StageRecorder>(*model_, *optimizer_, *replay, Backend::Eager, false);
  }

  // One batch; the optimizer steps when `step` is set (accumulating over the batches before).
  StepRecord run(const Tensor& x, const loss::SegTargets& targets, bool step) {
    StepRecord r;
    auto out = recorder_ ? recorder_->forward(x) : model_->forward(x);
    for (const auto& t : {out.one2many.boxes, out.one2many.scores, out.one2many.mask_coefficient, out.one2many.proto,
                          out.one2many.semantic, out.one2one->boxes, out.one2one->scores,
                          out.one2one->mask_coefficient})
      r.predictions.push_back(t.detach().clone());
    auto result = (*loss_)(out, targets);
    r.predictions.push_back(result.items.clone());
    result.total.sum().backward();
    for (const auto& p : model_->parameters()) {
      r.grad_defined.push_back(p.grad().defined());
      r.grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    }
    if (step) {
      std::vector<Tensor> params;
      for (const auto& p : model_->parameters())
        if (p.requires_grad()) params.push_back(p);
      optim::clip_grad_norm(params, 10.0);
      if (recorder_)
        recorder_->optimizer_step();
      else
        optimizer_->step();
      optimizer_->zero_grad();
    }
    for (const auto& p : model_->parameters()) r.params.push_back(p.detach().clone());
    for (const auto& b : model_->buffers()) r.buffers.push_back(b.clone());
    for (const auto& [name, t] : optimizer_->state()) r.optimizer.push_back(t.clone());
    return r;
  }

  model::SegmentationModel& model() { return model_; }
  StageRecorder* recorder() { return recorder_.get(); }

 private:
  model::SegmentationModel model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<loss::SegmentationLoss> loss_;
  std::unique_ptr<StageRecorder> recorder_;
};

struct Batch {
  Tensor x;
  loss::SegTargets targets;
  bool step;
};

// Batches of two with changing instance counts (mask demand), one with no instances at all, a
// partial batch of one, and accumulation over two batches.
std::vector<Batch> schedule() {
  torch::manual_seed(1);
  std::vector<Batch> b;
  const std::vector<std::vector<int>> counts = {{3, 1}, {0, 0}, {5, 2}, {1}, {2, 4}};
  const std::vector<bool> steps = {true, false, true, true, true};
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto n = static_cast<int64_t>(counts[i].size());
    b.push_back({torch::rand({n, 3, 64, 64}), make_targets(counts[i], 64, 3), steps[i]});
  }
  return b;
}

void compare_fits(ReplayOptions options, optim::Kind kind = optim::Kind::MuSGD) {
  Fit native(std::nullopt, kind), replayed(options, kind);
  auto batches = schedule();
  for (size_t i = 0; i < batches.size(); ++i) {
    auto a = native.run(batches[i].x, batches[i].targets, batches[i].step);
    auto b = replayed.run(batches[i].x, batches[i].targets, batches[i].step);
    const auto at = " at batch " + std::to_string(i);
    expect_same_bytes(a.predictions, b.predictions, "predictions and loss" + at);
    EXPECT_EQ(a.grad_defined, b.grad_defined) << at;
    expect_same_bytes(a.grads, b.grads, "gradients" + at);
    expect_same_bytes(a.params, b.params, "parameters" + at);
    expect_same_bytes(a.buffers, b.buffers, "BatchNorm statistics" + at);
    expect_same_bytes(a.optimizer, b.optimizer, "optimizer state" + at);
  }
  // The route assertion: the recorded stages really replayed (4 full batches, 1 partial).
  const auto& log = replayed.recorder()->log();
  if (options.network) EXPECT_EQ(log.replays(Stage::SharedFeatures), 4);
  if (options.heads) EXPECT_EQ(log.replays(Stage::Heads), 4);
  if (options.network) EXPECT_EQ(log.reasons().at("shared features: input signature differs from the recorded one (partial batch)"), 1);
  if (options.optimizer) EXPECT_EQ(log.replays(Stage::Optimizer), 4);
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
