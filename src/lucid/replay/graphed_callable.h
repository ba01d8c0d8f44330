// A differentiable callable recorded once (forward and backward) and replayed, in C++: the
// counterpart of torch.cuda.make_graphed_callables for one callable.
//   forward:  inputs are copied into static input buffers (skipped when they already are those
//             buffers, e.g. an earlier recording's outputs), the forward graph replays, and the
//             outputs are aliases of static output buffers that the next replay overwrites.
//   backward: incoming gradients are copied into static buffers (zeros for an output the loss did
//             not use), the backward graph replays, and copies of the input and parameter gradients
//             are handed to autograd, which accumulates them exactly as native gradients (a static
//             buffer handed out would be adopted as param.grad and overwritten by the next replay).
// The callable is one autograd node, so a prediction whose outputs the loss ignores never runs its
// backward and its parameters keep no gradient, as natively. Its graphs use the context's shared
// memory pool, so replays must follow the context's capture order (graph.h); a backward after a
// later forward replay (whose activations overwrote its own) is an error.
#pragma once
#include "lucid/replay/graph.h"

namespace lucid::replay {

using torch::Tensor;

class GraphedCallable {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  GraphedCallable(std::string name, Fn fn, std::vector<Tensor> params);

  // The static inputs: aliases of `sample` (alias = true: the caller's tensors are stable buffers),
  // or buffers of its shape, strides and dtype. requires_grad is fixed per input from here on.
  void set_inputs(const std::vector<Tensor>& sample, const std::vector<bool>& requires_grad, bool alias);
  // Forward captures run in replay order, then backward captures in reverse order (ctx's order).
  void capture_forward(RecordingContext& ctx);
  void capture_backward(RecordingContext& ctx);

  // Same shapes, strides, dtypes and devices as the recorded inputs.
  bool matches(const std::vector<Tensor>& inputs) const;
  // Replays the recording as one autograd node (inputs, then parameters, are its inputs).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  const std::string& name() const { return name_; }
  // Valid between capture_forward and the next replay; carry autograd history only until
  // capture_backward.
  const std::vector<Tensor>& static_outputs() const { return static_outputs_; }

  // The node's halves (used by its autograd function).
  std::vector<Tensor> replay_forward(const std::vector<Tensor>& inputs);
  std::vector<Tensor> replay_backward(const std::vector<Tensor>& grads, int64_t generation);
  // Counts forward replays: a backward belongs to the latest one, whose activations the
  // recording's memory still holds.
  int64_t generation() const { return generation_; }

 private:
  std::vector<Tensor> surface() const;  // inputs then parameters that require gradients

  std::string name_;
  Fn fn_;
  std::vector<Tensor> params_;
  RecordingContext* ctx_ = nullptr;
  int forward_position_ = -1, backward_position_ = -1;  // in ctx_'s replay order
  int64_t generation_ = 0;
  std::vector<Tensor> static_inputs_, static_outputs_, static_grad_outputs_;
  std::vector<Tensor> static_grads_;  // per input, then per parameter; undefined where none flows
  std::vector<bool> output_requires_grad_;
  std::vector<Tensor> eager_outputs_;  // eager stand-in: the last forward's outputs, with their graph
  Graph forward_, backward_;
};

// Copies `inputs` into `buffers` and returns aliases of the buffers that pass gradients straight
// through to `inputs`: several recordings that read the same native tensors then share one copy.
std::vector<Tensor> stage_into(const std::vector<Tensor>& inputs, const std::vector<Tensor>& buffers);

}  // namespace lucid::replay
