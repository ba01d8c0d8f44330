#include "lucid/replay/recorder.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <unordered_set>

#include "lucid/util/device.h"
#include "lucid/util/trace.h"

namespace lucid::replay {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Reserved device memory after the allocator's unused cache is released: taken before and after a
// recording, the difference is what the recording keeps (its share of the pool, static buffers).
double released_reserved_mib(Backend backend) {
  if (backend != Backend::CudaGraph) return 0;
  c10::cuda::CUDACachingAllocator::emptyCache();
  return util::cuda_memory(c10::cuda::current_device()).reserved_mib;
}

// Every model parameter outside the head: the backbone and the neck.
std::vector<Tensor> shared_parameters(const model::SegmentationModelImpl& m) {
  std::unordered_set<const void*> head;
  for (const auto& p : m.head()->parameters()) head.insert(p.unsafeGetTensorImpl());
  std::vector<Tensor> out;
  for (const auto& p : m.parameters())
    if (!head.count(p.unsafeGetTensorImpl())) out.push_back(p);
  return out;
}

// Every raw prediction that carries gradients (the one-to-one prototypes are detached copies).
std::vector<Tensor> differentiable_outputs(const model::HeadOutputs& o) {
  std::vector<Tensor> out;
  auto add = [&](const model::BranchOutputs& b) {
    for (const auto& t : {b.boxes, b.scores, b.mask_coefficient, b.proto, b.semantic})
      if (t.defined() && t.requires_grad()) out.push_back(t);
  };
  add(o.one2many);
  if (o.one2one) add(*o.one2one);
  return out;
}

// Exchanges param.grad with the optimizer recording's gradient buffers for its lifetime: recorded
// stages read (and the eager stand-in re-reads) the buffers, whatever tensors autograd produced.
class GradSwap {
 public:
  GradSwap(std::vector<Tensor>& params, std::vector<Tensor>& buffers) : params_(params), buffers_(buffers) { swap(); }
  ~GradSwap() { swap(); }

 private:
  void swap() {
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].grad();
      params_[i].mutable_grad() = buffers_[i];
      buffers_[i] = g;
    }
  }
  std::vector<Tensor>& params_;
  std::vector<Tensor>& buffers_;
};

}  // namespace

StageRecorder::StageRecorder(model::SegmentationModelImpl& model, optim::Optimizer& optimizer, ReplayOptions options,
                             Backend backend, bool print)
    : model_(model), optimizer_(optimizer), options_(options), backend_(backend), log_(print) {
  facts_ = facts_for(model_);
}

StageRecorder::~StageRecorder() {
  // Replays may still run on the device: wait before the graphs and their memory go.
  try {
    if (ctx_) ctx_->synchronize();
  } catch (...) {
  }
}

FitFacts StageRecorder::facts_for(const model::SegmentationModelImpl& m) const {
  FitFacts f;
  const auto params = m.parameters();
  f.cuda = backend_ == Backend::Eager || (!params.empty() && params.front().is_cuda());
  f.devices = 1;
  for (const auto& p : shared_parameters(m))
    if (!p.requires_grad()) f.shared_frozen = true;
  auto head = m.head();
  for (int64_t k = 0; k < head->prediction_count(); ++k)
    for (const auto& p : head->prediction_parameters(k))
      if (!p.requires_grad()) f.heads_frozen = true;
  f.head_topology_stock = m.strides().size() == 3 && head->options().ch.size() == 3;
  return f;
}

void StageRecorder::warm_up(const Tensor& x) {
  // Warm-up passes run every kernel once on the capture stream: library handles, workspaces and
  // lazy loads must not happen during capture.
  std::vector<Tensor> params;
  for (const auto& p : model_.parameters())
    if (p.requires_grad()) params.push_back(p);
  // Cached blocks are per stream: the native steps' cache (released by the caller) and the
  // warm-up's would add up.
  ctx_->on_capture_stream([&] {
    for (int i = 0; i < 3; ++i) {
      torch::AutoGradMode grad(true);
      auto roots = differentiable_outputs(model_.heads(model_.shared(x)));
      std::vector<Tensor> ones;
      for (const auto& r : roots) ones.push_back(torch::ones_like(r));
      util::Autocast autocast_off(false);
      torch::autograd::grad(roots, params, ones, false, false, true);
    }
  });
  if (backend_ == Backend::CudaGraph) c10::cuda::CUDACachingAllocator::emptyCache();
}

bool StageRecorder::record_features(const Tensor& x, bool network, bool heads) {
  const auto t0 = Clock::now();
  // Recording happens before the step's own forward. Warm-up passes (and the eager stand-in's
  // capture) move BatchNorm statistics: every buffer is restored before the step runs.
  std::vector<Tensor> buffers = model_.buffers(), saved;
  for (const auto& b : buffers) saved.push_back(b.clone());
  auto restore = [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(saved[i]);
  };
  try {
    if (!ctx_) ctx_ = std::make_unique<RecordingContext>(backend_);
    const double before = released_reserved_mib(backend_);
    warm_up(x);
    ctx_->synchronize();
    std::vector<Tensor> sample;
    if (network) {
      network_ = std::make_unique<GraphedCallable>(
          "shared features", [this](const std::vector<Tensor>& in) { return model_.shared(in[0]); },
          shared_parameters(model_));
      network_->set_inputs({x}, {false}, /*alias=*/false);
      network_->capture_forward(*ctx_);
      sample = network_->static_outputs();
    } else {
      // Native features are staged once per step into buffers every head recording reads.
      torch::NoGradGuard no_grad;
      for (const auto& f : model_.shared(x))
        head_inputs_.push_back(torch::empty_strided(f.sizes(), f.strides(), f.options()));
      sample = head_inputs_;
    }
    if (heads) {
      auto head = model_.head().ptr();
      for (int64_t k = 0; k < head->prediction_count(); ++k) {
        heads_.push_back(std::make_unique<GraphedCallable>(
            head->prediction_name(k), [head, k](const std::vector<Tensor>& in) { return head->predict(k, in); },
            head->prediction_parameters(k)));
        heads_.back()->set_inputs(sample, std::vector<bool>(sample.size(), !head->prediction_detached(k)),
                                  /*alias=*/true);
        heads_.back()->capture_forward(*ctx_);
      }
      for (auto it = heads_.rbegin(); it != heads_.rend(); ++it) (*it)->capture_backward(*ctx_);
    }
    if (network) network_->capture_backward(*ctx_);
    ctx_->synchronize();
    restore();
    features_kept_mib_ = released_reserved_mib(backend_) - before;
  } catch (const std::exception& e) {
    release_features();
    restore();
    features_failed_ = true;
    std::printf("replay: recording the model stages failed, they run natively: %s\n", e.what());
    return false;
  }
  features_record_s_ = seconds_since(t0);
  std::printf("replay: recorded %s%s%s in %.2f s, keeping %.0f MiB\n", network ? "the shared features" : "",
              network && heads ? " and " : "", heads ? "the head predictions" : "", features_record_s_,
              features_kept_mib_);
  return true;
}

void StageRecorder::release_features() {
  if (ctx_) ctx_->synchronize();
  heads_.clear();
  network_.reset();
  head_inputs_.clear();
}

model::HeadOutputs StageRecorder::forward(const Tensor& x) {
  facts_.training = model_.is_training();
  facts_.head_hooks = model_.has_head_hooks();
  facts_.anomaly_detection = torch::autograd::AnomalyMode::is_enabled();
  facts_.recording_failed = features_failed_;
  const auto rn = route(Stage::SharedFeatures, options_, facts_);
  const auto rh = route(Stage::Heads, options_, facts_);
  auto note = [&](Stage s, const Route& r) {
    if (options_.enabled(s)) log_.record(s, r);
  };
  auto native_heads = [&](const std::vector<Tensor>& feats) {
    util::TraceRange range("heads");
    auto out = model_.heads(feats);
    model_.run_head_hooks(out);
    return out;
  };
  auto native_step = [&](const Route& network_route, const Route& heads_route, const std::vector<Tensor>* feats) {
    note(Stage::SharedFeatures, network_route);
    note(Stage::Heads, heads_route);
    if (feats) return native_heads(*feats);
    std::vector<Tensor> f;
    {
      util::TraceRange range("shared features");
      f = model_.shared(x);
    }
    return native_heads(f);
  };
  if (!rn.replay && !rh.replay) return native_step(rn, rh, nullptr);
  if (!network_ && heads_.empty() && !features_failed_ && !record_features(x, rn.replay, rh.replay)) {
    const Route failed{false, "its recording failed"};
    return native_step(rn.replay ? failed : rn, rh.replay ? failed : rh, nullptr);
  }
  std::vector<Tensor> feats;
  if (!rn.replay) {
    util::TraceRange range("shared features");
    feats = model_.shared(x);
  }
  // The recorded set of stages must be the one routed now, with the recorded input signature.
  const bool net = network_ != nullptr, hd = !heads_.empty();
  if (net != rn.replay || hd != rh.replay) {
    const Route other{false, "another recorded stage runs natively this step"};
    return native_step(rn.replay ? other : rn, rh.replay ? other : rh, rn.replay ? nullptr : &feats);
  }
  const bool fits = net ? network_->matches({x}) : heads_.front()->matches(feats);
  if (!fits) {
    return native_step(route_step(Stage::SharedFeatures, false), route_step(Stage::Heads, false),
                       net ? nullptr : &feats);
  }
  note(Stage::SharedFeatures, rn);
  note(Stage::Heads, rh);
  if (net) {
    util::TraceRange range("shared features");
    feats = (*network_)({x});
  }
  if (!hd) return native_heads(feats);
  util::TraceRange range("heads");
  auto head = model_.head();
  const auto inputs = net ? feats : stage_into(feats, head_inputs_);
  std::vector<Tensor> detached;
  for (const auto& f : inputs) detached.push_back(f.detach());
  std::vector<std::vector<Tensor>> predictions;
  for (int64_t k = 0; k < head->prediction_count(); ++k)
    predictions.push_back((*heads_[static_cast<size_t>(k)])(head->prediction_detached(k) ? detached : inputs));
  return head->compose(feats, predictions);
}

bool StageRecorder::record_optimizer() {
  const auto t0 = Clock::now();
  try {
    if (!ctx_) ctx_ = std::make_unique<RecordingContext>(backend_);
    const double before = released_reserved_mib(backend_);
    opt_params_ = optimizer_.parameters();
    opt_grads_.clear();
    for (const auto& p : opt_params_) {
      const auto& g = p.grad();
      opt_grads_.push_back(torch::empty_strided(g.sizes(), g.strides(), g.options()));
    }
    // Warm-up steps move the optimizer state (momentum, step count): restore it afterwards.
    auto state = optimizer_.state();
    std::vector<Tensor> saved;
    for (const auto& [name, t] : state) saved.push_back(t.clone());
    ctx_->on_capture_stream([&] {
      for (int i = 0; i < 2; ++i) {
        GradSwap swap(opt_params_, opt_grads_);
        optimizer_.prepare_update();
        optimizer_.orthogonalize();
      }
    });
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < state.size(); ++i) state[i].second.copy_(saved[i]);
    }
    ctx_->synchronize();
    // The optimizer graphs share the model stages' pool: they replay between steps (graph.h).
    prepare_.capture(*ctx_, ctx_->pool(), [this] {
      GradSwap swap(opt_params_, opt_grads_);
      optimizer_.prepare_update();
    });
    if (optimizer_.kind() == optim::Kind::MuSGD)
      orthogonalize_.capture(*ctx_, ctx_->pool(), [this] {
        GradSwap swap(opt_params_, opt_grads_);
        optimizer_.orthogonalize();
      });
    ctx_->synchronize();
    optimizer_kept_mib_ = released_reserved_mib(backend_) - before;
  } catch (const std::exception& e) {
    if (ctx_) ctx_->synchronize();
    prepare_.reset();
    orthogonalize_.reset();
    opt_grads_.clear();
    optimizer_failed_ = true;
    std::printf("replay: recording the optimizer stages failed, they run natively: %s\n", e.what());
    return false;
  }
  optimizer_record_s_ = seconds_since(t0);
  std::printf("replay: recorded the optimizer's update preparation%s in %.2f s, keeping %.0f MiB\n",
              orthogonalize_.recorded() ? " and orthogonalisation" : "", optimizer_record_s_, optimizer_kept_mib_);
  return true;
}

void StageRecorder::optimizer_step() {
  facts_.recording_failed = optimizer_failed_;
  auto r = route(Stage::Optimizer, options_, facts_);
  if (r.replay) {
    // A recording reads every parameter's gradient: a step where one has none runs natively.
    bool all = true;
    for (const auto& p : optimizer_.parameters()) all = all && p.grad().defined();
    if (!all) r = route_step(Stage::Optimizer, false);
  }
  if (r.replay && !prepare_.recorded() && !record_optimizer()) r = Route{false, "its recording failed"};
  if (options_.optimizer) log_.record(Stage::Optimizer, r);
  if (!r.replay) {
    optimizer_.step();
    return;
  }
  {
    torch::NoGradGuard no_grad;
    std::vector<Tensor> grads;
    for (const auto& p : opt_params_) grads.push_back(p.grad());
    torch::_foreach_copy_(opt_grads_, grads);
  }
  optimizer_.upload_hypers();
  ctx_->replaying_other();
  {
    util::TraceRange range("optimizer prepare");
    prepare_.replay();
  }
  if (orthogonalize_.recorded()) {
    util::TraceRange range("optimizer orthogonalize");
    orthogonalize_.replay();
  }
  util::TraceRange range("optimizer apply");
  optimizer_.apply();
}

nlohmann::ordered_json StageRecorder::summary() const {
  nlohmann::ordered_json j;
  auto stage = [&](Stage s, bool recorded) {
    return nlohmann::ordered_json{{"requested", options_.enabled(s)},
                                  {"recorded", recorded},
                                  {"replayed_steps", log_.replays(s)},
                                  {"native_steps", log_.native(s)}};
  };
  j["shared_features"] = stage(Stage::SharedFeatures, network_recorded());
  j["head_predictions"] = stage(Stage::Heads, heads_recorded());
  j["optimizer_stages"] = stage(Stage::Optimizer, optimizer_recorded());
  j["native_reasons"] = log_.reasons();
  j["record_seconds"] = {{"model_stages", features_record_s_}, {"optimizer", optimizer_record_s_}};
  // Reserved memory each recording added (CUDA; the model stages' includes the shared pool).
  j["kept_mib"] = {{"model_stages", features_kept_mib_}, {"optimizer", optimizer_kept_mib_}};
  return j;
}

}  // namespace lucid::replay
