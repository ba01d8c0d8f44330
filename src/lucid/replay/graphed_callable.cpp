#include "lucid/replay/graphed_callable.h"

#include "lucid/util/device.h"

namespace lucid::replay {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GraphedNode : torch::autograd::Function<GraphedNode> {
  // `params` must be an at::TensorList: a std::vector<Tensor> would not be seen as differentiable
  // inputs and the parameters would silently get no gradient (tested).
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList params, int64_t callable) {
    ctx->saved_data["callable"] = callable;
    ctx->set_materialize_grads(false);
    auto* self = reinterpret_cast<GraphedCallable*>(callable);
    auto out = self->replay_forward(inputs.vec());
    ctx->saved_data["generation"] = self->generation();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* self = reinterpret_cast<GraphedCallable*>(ctx->saved_data["callable"].toInt());
    auto out = self->replay_backward(grads, ctx->saved_data["generation"].toInt());
    out.emplace_back();  // the non-tensor argument
    return out;
  }
};

struct StageNode : torch::autograd::Function<StageNode> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, int64_t buffers) {
    const auto& bufs = *reinterpret_cast<const std::vector<Tensor>*>(buffers);
    ctx->set_materialize_grads(false);
    variable_list out;
    for (size_t i = 0; i < inputs.size(); ++i) out.push_back(bufs[i].copy_(inputs[i]).detach());
    return out;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    grads.emplace_back();
    return grads;
  }
};

}  // namespace

std::vector<Tensor> stage_into(const std::vector<Tensor>& inputs, const std::vector<Tensor>& buffers) {
  return StageNode::apply(at::TensorList(inputs), reinterpret_cast<int64_t>(&buffers));
}

GraphedCallable::GraphedCallable(std::string name, Fn fn, std::vector<Tensor> params)
    : name_(std::move(name)), fn_(std::move(fn)), params_(std::move(params)) {}

void GraphedCallable::set_inputs(const std::vector<Tensor>& sample, const std::vector<bool>& requires_grad,
                                 bool alias) {
  torch::NoGradGuard no_grad;
  static_inputs_.clear();
  for (size_t i = 0; i < sample.size(); ++i) {
    Tensor t = alias
                   ? sample[i].detach()
                   : torch::empty_strided(sample[i].sizes(), sample[i].strides(), sample[i].options()).copy_(sample[i]);
    static_inputs_.push_back(t.requires_grad_(requires_grad[i]));
  }
}

std::vector<Tensor> GraphedCallable::surface() const {
  std::vector<Tensor> s;
  for (const auto& t : static_inputs_)
    if (t.requires_grad()) s.push_back(t);
  for (const auto& p : params_)
    if (p.requires_grad()) s.push_back(p);
  return s;
}

void GraphedCallable::capture_forward(RecordingContext& ctx) {
  ctx_ = &ctx;
  forward_position_ = ctx.add_forward();
  torch::AutoGradMode grad(true);
  if (ctx.backend() == Backend::CudaGraph) {
    forward_.capture(ctx, ctx.pool(), [&] { static_outputs_ = fn_(static_inputs_); });
  } else {
    eager_outputs_ = fn_(static_inputs_);
    static_outputs_.clear();
    for (const auto& o : eager_outputs_) static_outputs_.push_back(o.detach().clone());
  }
  const auto& outs = ctx.backend() == Backend::CudaGraph ? static_outputs_ : eager_outputs_;
  output_requires_grad_.clear();
  for (const auto& o : outs) output_requires_grad_.push_back(o.requires_grad());
}

void GraphedCallable::capture_backward(RecordingContext& ctx) {
  const bool cuda = ctx.backend() == Backend::CudaGraph;
  const auto& outs = cuda ? static_outputs_ : eager_outputs_;
  std::vector<Tensor> roots;
  static_grad_outputs_.assign(outs.size(), Tensor());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!output_requires_grad_[i]) continue;
    static_grad_outputs_[i] = torch::zeros_like(outs[i], at::MemoryFormat::Preserve);
    roots.push_back(outs[i]);
  }
  std::vector<Tensor> root_grads;
  for (const auto& g : static_grad_outputs_)
    if (g.defined()) root_grads.push_back(g);
  const auto wrt = surface();
  std::vector<Tensor> grads;
  auto body = [&] {
    // Backward passes run outside autocast, recorded or not.
    util::Autocast autocast_off(false);
    grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  };
  backward_position_ = ctx.add_backward();
  if (cuda)
    backward_.capture(ctx, ctx.pool(), body);
  else
    body();
  // Align with inputs then parameters; only gradients autograd produced get a static buffer.
  static_grads_.clear();
  size_t k = 0;
  auto take = [&](const Tensor& t) {
    if (!t.requires_grad()) {
      static_grads_.emplace_back();
      return;
    }
    const auto& g = grads[k++];
    static_grads_.push_back(!g.defined() ? Tensor() : cuda ? g : torch::empty_like(g, at::MemoryFormat::Preserve));
  };
  for (const auto& t : static_inputs_) take(t);
  for (const auto& p : params_) take(p);
  // The outputs keep their storage but drop the capture's autograd history.
  for (auto& o : static_outputs_) o = o.detach();
  eager_outputs_.clear();
}

bool GraphedCallable::matches(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto &a = inputs[i], &b = static_inputs_[i];
    if (a.sizes() != b.sizes() || a.strides() != b.strides() || a.scalar_type() != b.scalar_type() ||
        a.device() != b.device())
      return false;
  }
  return true;
}

std::vector<Tensor> GraphedCallable::operator()(const std::vector<Tensor>& inputs) {
  return GraphedNode::apply(at::TensorList(inputs), at::TensorList(params_), reinterpret_cast<int64_t>(this));
}

std::vector<Tensor> GraphedCallable::replay_forward(const std::vector<Tensor>& inputs) {
  ctx_->replaying_forward(forward_position_, name_);
  ++generation_;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].data_ptr() != static_inputs_[i].data_ptr()) static_inputs_[i].copy_(inputs[i]);
  if (ctx_->backend() == Backend::CudaGraph) {
    forward_.replay();
  } else {
    torch::AutoGradMode grad(true);
    eager_outputs_ = fn_(static_inputs_);
    torch::NoGradGuard none;
    for (size_t i = 0; i < eager_outputs_.size(); ++i) static_outputs_[i].copy_(eager_outputs_[i]);
  }
  std::vector<Tensor> out;
  for (const auto& o : static_outputs_) out.push_back(o.detach());
  return out;
}

std::vector<Tensor> GraphedCallable::replay_backward(const std::vector<Tensor>& grads, int64_t generation) {
  if (generation != generation_)
    throw std::logic_error("replayed backward of " + name_ + " after a later forward replay overwrote its activations");
  ctx_->replaying_backward(backward_position_, name_);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < static_grad_outputs_.size(); ++i) {
    auto& buf = static_grad_outputs_[i];
    if (!buf.defined()) continue;
    if (!grads[i].defined())
      buf.zero_();
    else if (grads[i].data_ptr() != buf.data_ptr())
      buf.copy_(grads[i]);
  }
  if (ctx_->backend() == Backend::CudaGraph) {
    backward_.replay();
  } else {
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < eager_outputs_.size(); ++i)
      if (static_grad_outputs_[i].defined()) {
        roots.push_back(eager_outputs_[i]);
        root_grads.push_back(static_grad_outputs_[i]);
      }
    auto g = torch::autograd::grad(roots, surface(), root_grads, false, false, true);
    // g follows the surface (inputs, then parameters, that require gradients).
    size_t k = 0;
    auto put = [&](const Tensor& t, Tensor& slot) {
      if (!t.requires_grad()) return;
      const auto& v = g[k++];
      if (slot.defined() && v.defined()) slot.copy_(v);
    };
    for (size_t i = 0; i < static_inputs_.size(); ++i) put(static_inputs_[i], static_grads_[i]);
    for (size_t i = 0; i < params_.size(); ++i) put(params_[i], static_grads_[static_inputs_.size() + i]);
    eager_outputs_.clear();
  }
  std::vector<Tensor> out;
  for (const auto& s : static_grads_) out.push_back(s.defined() ? s.clone() : Tensor());
  return out;
}

}  // namespace lucid::replay
