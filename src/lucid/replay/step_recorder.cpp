#include "lucid/replay/step_recorder.h"

#include <chrono>
#include <sstream>

#include <c10/cuda/CUDACachingAllocator.h>

#include "lucid/util/device.h"

namespace lucid::replay {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void describe(std::ostream& out, at::IntArrayRef sizes, at::IntArrayRef strides, torch::ScalarType type,
              const torch::Device& device) {
  out << sizes << strides << type << device << ";";
}

void describe(std::ostream& out, const Tensor& t) {
  if (!t.defined()) {
    out << "-;";
    return;
  }
  describe(out, t.sizes(), t.strides(), t.scalar_type(), t.device());
}

// Buffers on the recording's device for the step's targets (they arrive on the host).
loss::PaddedTargets static_like(const loss::PaddedTargets& t, const torch::Device& device) {
  auto out = t;
  for (Tensor* v : {&out.labels, &out.boxes, &out.valid, &out.masks, &out.sem_masks})
    if (v->defined()) *v = torch::empty(v->sizes(), v->options().device(device));
  return out;
}

// Copies the step's targets into the recording's buffers without blocking the host (host sources
// are pinned first).
void stage(const loss::PaddedTargets& src, loss::PaddedTargets& dst) {
  if (!dst.labels.is_cuda()) {
    loss::copy_targets(src, dst);
    return;
  }
  auto pinned = src;
  for (Tensor* v : {&pinned.labels, &pinned.boxes, &pinned.valid, &pinned.masks, &pinned.sem_masks})
    if (v->defined() && v->is_cpu() && !v->is_pinned()) *v = v->pin_memory();
  loss::copy_targets(pinned, dst);
}

model::BranchOutputs detached(const model::BranchOutputs& b) {
  auto d = [](const Tensor& t) { return t.defined() ? t.detach() : t; };
  return {d(b.boxes), d(b.scores), d(b.mask_coefficient), d(b.proto), d(b.semantic)};
}

model::HeadOutputs detached(const model::HeadOutputs& o) {
  model::HeadOutputs out = o;
  out.one2many = detached(o.one2many);
  if (o.one2one) out.one2one = detached(*o.one2one);
  for (auto& f : out.feats) f = f.detach();
  return out;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}

}  // namespace

struct StepRecorder::Recording {
  Tensor x;                     // the shared buffer of its input signature
  loss::PaddedTargets targets;  // on the device
  Graph graph;
  model::HeadOutputs outputs;  // kept only with keep_outputs
  Tensor items;
  std::vector<bool> grad_defined;  // per trainable parameter: whether a gradient flows to it
};

StepRecorder::StepRecorder(StepProgram program, model::SegmentationModel model, optim::Optimizer& optimizer,
                           optim::ModelEMA* ema, Backend backend, int64_t max_recordings, bool keep_outputs, bool print,
                           bool record_on_second_use)
    : program_(std::move(program)),
      model_(std::move(model)),
      optimizer_(optimizer),
      ema_(ema),
      backend_(backend),
      max_recordings_(max_recordings),
      keep_outputs_(keep_outputs),
      log_(print),
      record_on_second_use_(record_on_second_use && !keep_outputs) {
  for (const auto& p : model_->parameters())
    if (p.requires_grad()) params_.push_back(p);
  grad_bufs_.resize(params_.size());
}

StepRecorder::~StepRecorder() {
  // Replays may still run on the device: wait before the graphs and their memory go.
  try {
    if (micro_ctx_) micro_ctx_->synchronize();
    if (update_ctx_) update_ctx_->synchronize();
  } catch (...) {
  }
}

FitFacts StepRecorder::facts(bool new_key) const {
  FitFacts f;
  f.cuda = backend_ == Backend::Eager || (!params_.empty() && params_.front().is_cuda());
  f.devices = 1;
  f.training = model_->is_training();
  f.head_hooks = model_->has_head_hooks();
  f.anomaly_detection = torch::autograd::AnomalyMode::is_enabled();
  f.recordings_full = new_key && static_cast<int64_t>(micro_.size()) >= max_recordings_;
  return f;
}

std::string StepRecorder::key_of(const Tensor& x, const loss::PaddedTargets& t) const {
  std::ostringstream out;
  describe(out, x);
  for (const auto* v : {&t.labels, &t.boxes, &t.valid, &t.masks, &t.sem_masks})
    out << v->sizes() << (v->defined() ? v->scalar_type() : torch::kByte) << v->defined() << ";";
  out << t.overlap;
  return out.str();
}

Tensor StepRecorder::input_buffer(at::IntArrayRef sizes, at::IntArrayRef strides, const torch::TensorOptions& options) {
  std::ostringstream signature;
  describe(signature, sizes, strides, options.dtype().toScalarType(), options.device());
  auto& input = inputs_[signature.str()];
  if (!input.defined()) input = torch::empty_strided(sizes, strides, options);
  return input;
}

RecordingContext& StepRecorder::micro_context() {
  if (!micro_ctx_) micro_ctx_ = std::make_unique<RecordingContext>(backend_);
  return *micro_ctx_;
}

void StepRecorder::allocate_step_grads() {
  // Outside the recordings' pool: buffers that outlive every recording.
  if (step_grads_.empty())
    for (const auto& p : params_) step_grads_.push_back(torch::empty_like(p));  // AccumulateGrad's layout
}

void StepRecorder::run_micro_step(const Tensor& x, const loss::PaddedTargets& targets, Recording& r) {
  auto [outputs, result] = program_.forward_loss(x, targets);
  std::vector<Tensor> grads;
  {
    util::Autocast autocast_off(false);  // backward passes run outside autocast, as natively
    grads = torch::autograd::grad({result.total.sum()}, params_, {}, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  }
  r.grad_defined.assign(grads.size(), false);
  std::vector<Tensor> to, from;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    r.grad_defined[i] = true;
    to.push_back(step_grads_[i]);
    from.push_back(grads[i]);
  }
  torch::NoGradGuard no_grad;
  if (!to.empty()) torch::_foreach_copy_(to, from);
  if (keep_outputs_) r.outputs = detached(outputs);
  r.items = result.items;
}

std::unique_ptr<StepRecorder::Recording> StepRecorder::record(const Tensor& x, const loss::PaddedTargets& targets,
                                                              int warm_ups) {
  const auto t0 = Clock::now();
  auto rec = std::make_unique<Recording>();
  const auto device = x.device();
  // Outside the recordings' pool: buffers that outlive every recording.
  rec->x = input_buffer(x.sizes(), x.strides(), x.options());
  allocate_step_grads();
  rec->targets = static_like(targets, device);
  // Warm-up passes move BatchNorm statistics: every buffer is restored before the step runs. The
  // capture itself runs nothing.
  std::vector<Tensor> buffers = model_->buffers(), saved;
  if (warm_ups > 0)
    for (const auto& b : buffers) saved.push_back(b.clone());
  auto restore = [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < saved.size(); ++i) buffers[i].copy_(saved[i]);
  };
  Recording* r = rec.get();
  auto body = [this, r] { run_micro_step(r->x, r->targets, *r); };
  try {
    auto& ctx = micro_context();
    if (!rec->x.is_same(x)) rec->x.copy_(x, /*non_blocking=*/true);
    stage(targets, rec->targets);
    // The warm-up draws from the recordings' pool, so its memory serves the capture after it.
    if (warm_ups > 0) {
      const int64_t kept = ctx.run_in_pool(
          [&] {
            for (int i = 0; i < warm_ups; ++i) body();
            r->outputs = {};  // the warm-up's tensors go before the capture allocates its own
            r->items = Tensor();
          },
          /*capture_stream=*/true);
      drop_if_kept(kept, "a warm-up");
      restore();
    }
    ctx.synchronize();
    rec->graph.capture(ctx, ctx.pool(), body);
    ctx.synchronize();
    retired_.clear();
  } catch (...) {
    if (micro_ctx_) micro_ctx_->synchronize();
    restore();
    throw;
  }
  micro_record_s_ += seconds_since(t0);
  ++recorded_total_;
  return rec;
}

MicroStep StepRecorder::eager_micro_step(const Tensor& x, const loss::PaddedTargets& targets) {
  const auto t0 = Clock::now();
  allocate_step_grads();
  if (!eager_items_.defined()) eager_items_ = torch::empty({loss::kLossTerms}, x.options().dtype(torch::kFloat));
  Recording r;
  // On the capture stream, in the pool: what the step allocates there is what a capture of the same
  // key will reuse.
  const int64_t kept = micro_context().run_in_pool(
      [&] {
        auto device_targets = static_like(targets, x.device());
        stage(targets, device_targets);
        run_micro_step(x, device_targets, r);
        eager_items_.copy_(r.items);
        r.items = Tensor();
      },
      /*capture_stream=*/true);
  drop_if_kept(kept, "a step run eagerly");
  accumulate(r.grad_defined);
  ++eager_steps_;
  eager_s_ += seconds_since(t0);
  return MicroStep{{}, eager_items_};
}

void StepRecorder::accumulate(const std::vector<bool>& grad_defined) {
  // AccumulateGrad's rule: a parameter without a gradient takes this one, one with a gradient adds it.
  std::vector<Tensor> assign_to, assign_from, add_to, add_from;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grad_defined[i]) continue;
    const auto& g = step_grads_[i];
    auto& pg = params_[i].mutable_grad();
    if (pg.defined()) {
      add_to.push_back(pg);
      add_from.push_back(g);
      continue;
    }
    if (!grad_bufs_[i].defined()) grad_bufs_[i] = torch::empty_like(g);
    assign_to.push_back(grad_bufs_[i]);
    assign_from.push_back(g);
    pg = grad_bufs_[i];
  }
  torch::NoGradGuard no_grad;
  if (!assign_to.empty()) torch::_foreach_copy_(assign_to, assign_from);
  if (!add_to.empty()) torch::_foreach_add_(add_to, add_from);
}

std::optional<MicroStep> StepRecorder::micro_step(const Tensor& x, const loss::PaddedTargets& targets) {
  const auto key = key_of(x, targets);
  auto it = micro_.find(key);
  auto f = facts(it == micro_.end());
  f.recording_failed = micro_failed_;
  auto r = route(Stage::Step, ReplayOptions{false, false, false, true}, f);
  if (r.replay && it == micro_.end() && record_on_second_use_ && eager_uses_[key]++ == 0) {
    log_.record(Stage::Step, Route{false,
                                   "the first use of an input signature or capacity bucket (recorded at "
                                   "its second)"});
    return eager_micro_step(x, targets);
  }
  if (r.replay && it == micro_.end()) {
    try {
      const auto t0 = Clock::now();
      // After an eager step of the key the set-up is made and its memory is in the pool.
      const int warm_ups = eager_uses_.erase(key) ? 0 : 1;
      it = micro_.emplace(key, record(x, targets, warm_ups)).first;
      std::ostringstream what;
      what << x.sizes() << ", instance capacity " << targets.capacity();
      std::printf("replay: recorded the training step for images %s in %.2f s (%lld held)\n", what.str().c_str(),
                  seconds_since(t0), static_cast<long long>(micro_.size()));
    } catch (const std::exception& e) {
      micro_failed_ = true;
      failure_ = e.what();
      failure_ = failure_.substr(0, failure_.find('\n'));
      std::printf("replay: recording the training step failed, it runs natively: %s\n", e.what());
      r = Route{false, "its recording failed"};
    }
  }
  log_.record(Stage::Step, r);
  if (!r.replay) return std::nullopt;
  auto& rec = *it->second;
  if (!rec.x.is_same(x)) rec.x.copy_(x, /*non_blocking=*/true);
  stage(targets, rec.targets);
  rec.graph.replay();
  accumulate(rec.grad_defined);
  return MicroStep{rec.outputs, rec.items};
}

void StepRecorder::drop_if_kept(int64_t kept, const char* what) {
  if (kept == 0 || micro_.empty()) return;
  // What was kept (a lazily built cache) may lie in the recordings' temporaries, which their
  // replays overwrite: they go, and are recorded again when needed.
  std::printf("replay: %s kept %lld bytes of device memory; %zu step recordings are dropped\n", what,
              static_cast<long long>(kept), micro_.size());
  dropped_ += static_cast<int64_t>(micro_.size());
  // Destroyed only once a new capture holds the pool: the host allocator forgets a pool that no
  // graph holds, and a later capture into it would then fail.
  for (auto& [key, rec] : micro_) retired_.push_back(std::move(rec));
  micro_.clear();
}

void StepRecorder::beside_recordings(const std::function<void()>& fn) {
  if (!micro_ctx_ || micro_.empty()) {
    fn();
    return;
  }
  drop_if_kept(micro_ctx_->run_in_pool(fn, /*capture_stream=*/false), "work between replays");
}

bool StepRecorder::record_update() {
  const auto t0 = Clock::now();
  try {
    if (!update_ctx_) update_ctx_ = std::make_unique<RecordingContext>(backend_);
    // The recording reads and scales the gradients in fixed buffers: the current gradients move
    // into them (same values), and every later step's are copied there before a replay.
    update_grads_.clear();
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params_.size(); ++i) {
        auto& g = params_[i].mutable_grad();
        update_grads_.push_back(g.defined());
        if (!g.defined()) continue;
        if (!grad_bufs_[i].defined()) grad_bufs_[i] = torch::empty_like(g);
        if (!same_tensor(g, grad_bufs_[i])) grad_bufs_[i].copy_(g);
        g = grad_bufs_[i];
      }
    }
    // Warm-up updates move parameters, optimizer state, the EMA and the (clipped) gradients: all
    // are restored afterwards.
    std::vector<Tensor> moved = model_->parameters();
    for (const auto& b : model_->buffers()) moved.push_back(b);
    for (const auto& [name, t] : optimizer_.state()) moved.push_back(t);
    if (ema_)
      for (const auto& t : optim::float_state(*ema_->model())) moved.push_back(t);
    for (size_t i = 0; i < params_.size(); ++i)
      if (update_grads_[i]) moved.push_back(grad_bufs_[i]);
    std::vector<Tensor> saved;
    {
      torch::NoGradGuard no_grad;
      for (const auto& t : moved) saved.push_back(t.clone());
    }
    optimizer_.upload_hypers();
    update_ctx_->on_capture_stream([&] {
      for (int i = 0; i < 2; ++i) program_.update();
    });
    // The warm-up's cache on the capture stream would stay reserved beside the recording's pool.
    if (backend_ == Backend::CudaGraph) c10::cuda::CUDACachingAllocator::emptyCache();
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < moved.size(); ++i) moved[i].copy_(saved[i]);
    }
    update_ctx_->synchronize();
    update_.capture(*update_ctx_, update_ctx_->pool(), program_.update);
    update_ctx_->synchronize();
  } catch (const std::exception& e) {
    if (update_ctx_) update_ctx_->synchronize();
    update_.reset();
    update_failed_ = true;
    std::printf("replay: recording the optimizer step and EMA failed, they run natively: %s\n", e.what());
    return false;
  }
  update_record_s_ = seconds_since(t0);
  std::printf("replay: recorded the optimizer step and EMA in %.2f s\n", update_record_s_);
  return true;
}

bool StepRecorder::optimizer_step() {
  auto f = facts(false);
  f.recording_failed = update_failed_;
  auto r = route(Stage::StepUpdate, ReplayOptions{false, false, false, true}, f);
  if (r.replay && update_.recorded()) {
    std::vector<bool> have;
    for (const auto& p : params_) have.push_back(p.grad().defined());
    if (have != update_grads_) r = route_step(Stage::StepUpdate, false);
  }
  if (r.replay && !update_.recorded() && !record_update()) r = Route{false, "its recording failed"};
  log_.record(Stage::StepUpdate, r);
  if (!r.replay) return false;
  {
    torch::NoGradGuard no_grad;
    std::vector<Tensor> to, from;
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto& g = params_[i].grad();
      if (!g.defined() || same_tensor(g, grad_bufs_[i])) continue;
      to.push_back(grad_bufs_[i]);
      from.push_back(g);
    }
    if (!to.empty()) torch::_foreach_copy_(to, from);
  }
  optimizer_.upload_hypers();
  if (ema_) ema_->begin_update();
  update_.replay();
  optimizer_.count_step();
  optimizer_.zero_grad();
  return true;
}

nlohmann::ordered_json StepRecorder::summary() const {
  nlohmann::ordered_json j;
  j["requested"] = true;
  j["recordings"] = recordings();
  j["recorded_total"] = recorded_total_;
  j["dropped"] = dropped_;  // recordings dropped because a later warm-up kept memory
  j["max_recordings"] = max_recordings_;
  j["replayed_steps"] = log_.replays(Stage::Step);
  j["native_steps"] = log_.native(Stage::Step);
  j["update_recorded"] = update_recorded();
  j["update_replayed_steps"] = log_.replays(Stage::StepUpdate);
  j["update_native_steps"] = log_.native(Stage::StepUpdate);
  j["record_seconds"] = {{"micro_steps", micro_record_s_}, {"update", update_record_s_}};
  j["eager_steps"] = eager_steps_;  // first uses of a key, run eagerly in the pool
  j["eager_seconds"] = eager_s_;
  if (!failure_.empty()) j["recording_failure"] = failure_;  // the first line of what the failed capture threw
  return j;
}

}  // namespace lucid::replay
