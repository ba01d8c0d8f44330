// The segmentation model built from a model YAML. Two stages, each callable on its own:
//   shared(x)  -> the shared features P3, P4, P5 (backbone + neck)
//   heads(f)   -> raw predictions of every head branch
// forward(x) is their composition. Parameter and buffer names equal the reference's ("model.<i>.").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "lucid/config/model_yaml.h"
#include "lucid/model/heads.h"

namespace lucid::model {

// One row of the layer table printed by `model info` (the reference's parse_model printout).
struct LayerInfo {
  int index;
  std::string from;  // "-1", "[-1, 6]"
  int repeats;
  int64_t params;
  std::string module;
  std::string args;  // resolved arguments, Python-list style
};

struct ModelSummary {
  int64_t layers, parameters, gradients;
  double gflops;  // at the given image size
};

class SegmentationModelImpl : public torch::nn::Module {
 public:
  explicit SegmentationModelImpl(const config::ModelSpec& spec);

  std::vector<Tensor> shared(const Tensor& x);
  HeadOutputs heads(const std::vector<Tensor>& feats);
  HeadOutputs forward(const Tensor& x);

  // Hooks on the heads: called with the raw predictions after every forward (to inspect or adjust
  // them). Stage replay leaves the heads native while any is registered.
  using HeadHook = std::function<void(HeadOutputs&)>;
  void add_head_hook(HeadHook hook) { head_hooks_.push_back(std::move(hook)); }
  bool has_head_hooks() const { return !head_hooks_.empty(); }
  void run_head_hooks(HeadOutputs& out) const {
    for (const auto& h : head_hooks_) h(out);
  }

  // Inference output (see SegmentHeadImpl::decode) from raw predictions.
  Tensor decode(const HeadOutputs& out, int64_t max_det = 300, bool agnostic = false) const;

  // The layer graph as the YAML gives it: layer i's module and the layers it reads (-1 the one
  // before, other negatives relative, else absolute), and the layers the head reads.
  size_t layer_modules() const { return nodes_.size(); }
  std::shared_ptr<torch::nn::Module> layer(size_t i) const { return layers_->ptr(i); }
  const std::vector<int>& layer_inputs(size_t i) const { return nodes_[i].from; }
  const std::vector<int>& head_inputs() const { return head_from_; }

  const config::ModelSpec& spec() const { return spec_; }
  const std::vector<double>& strides() const { return strides_; }
  const std::vector<LayerInfo>& layer_table() const { return table_; }
  SegmentHead head() const { return head_; }
  int64_t nc() const { return spec_.nc; }
  bool end2end() const { return spec_.end2end; }

  int64_t layer_count() const;
  ModelSummary summary(int64_t imgsz = 640);

 private:
  struct Node {
    std::vector<int> from;  // absolute indices or -1 for previous
    std::function<Tensor(const std::vector<Tensor>&)> run;
  };
  config::ModelSpec spec_;
  torch::nn::ModuleList layers_{nullptr};
  std::vector<Node> nodes_;
  std::vector<int> head_from_;
  std::vector<bool> keep_;  // outputs later layers read
  SegmentHead head_{nullptr};
  std::vector<double> strides_;
  std::vector<LayerInfo> table_;
  std::vector<HeadHook> head_hooks_;
};
TORCH_MODULE(SegmentationModel);

// Reference-style printout: the layer table and the summary line.
std::string format_layer_table(const SegmentationModelImpl& model);
std::string format_summary(const SegmentationModelImpl& model, const ModelSummary& s);

// channels_last storage for every 4-D parameter (conv kernels), as CUDA training uses.
void use_channels_last(torch::nn::Module& module);

// All parameters and buffers by name (the state dict).
std::vector<std::pair<std::string, Tensor>> state_dict(const torch::nn::Module& module);

}  // namespace lucid::model
