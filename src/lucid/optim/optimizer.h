// SGD (Nesterov), AdamW, MuSGD, and Adam, Adamax, NAdam, RAdam, RMSprop (torch.optim's math, with
// their defaults: eps 1e-8, beta2 0.999, RMSprop alpha 0.99, NAdam momentum_decay 0.004) over flat
// tensor lists, as the reference trainer configures them (build_optimizer: betas (momentum, 0.999)
// for the Adam family, L2 weight decay but for AdamW's decoupled one, RMSprop with momentum).
// Learning rate, momentum (AdamW: beta1) and step counters live in device tensors that the schedule
// writes before each step, and the step is split into named stages so that each can later be
// recorded as a CUDA graph: prepare (decay, momentum, Nesterov), orthogonalize (Newton-Schulz for
// Muon parameters), apply (parameter updates; on a GPU, AdamW and Adam update their moments there
// too). No stage reads a device value on the host.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lucid::model {
class SegmentationModelImpl;
}

namespace lucid::optim {

namespace cuda {
struct GroupScalars;
}

enum class Kind { SGD, AdamW, MuSGD, Adam, Adamax, NAdam, RAdam, RMSprop };
std::string kind_name(Kind k);
// The Adam family: beta1 is the momentum and is not warmed (its groups carry no momentum key).
bool uses_betas(Kind k);

struct ParamGroup {
  std::string name;  // weight, bn, bias, muon; "-boost" for the x3 class-branch groups of MuSGD
  std::vector<torch::Tensor> params;
  std::vector<std::string> param_names;
  double initial_lr = 0;  // the schedule's base for this group
  double weight_decay = 0;
  bool use_muon = false;
  bool is_bias = false;
  // Host values of the current lr and momentum (AdamW: beta1), set by the schedule.
  double current_lr = 0, current_momentum = 0;
};

// The reference's `optimizer=auto` rule and explicit names.
struct OptimizerChoice {
  Kind kind;
  double lr, momentum;
  bool auto_chosen;  // auto also forces warmup_bias_lr to 0
};
OptimizerChoice choose_optimizer(const std::string& name, double lr0, double momentum, int64_t nc, int64_t iterations);

// Parameter groups by the reference's rules: weights with decay, normalisation weights, biases; for
// MuSGD every 2-D/4-D tensor goes to the Muon group and each group splits into a x3 "boost" part
// (class branches and the semantic branch) and the rest. Frozen tensors (requires_grad false) are
// left out.
std::vector<ParamGroup> build_param_groups(model::SegmentationModelImpl& model, Kind kind, double lr, double momentum,
                                           double decay);

// Scales gradients so their joint L2 norm is at most max_norm (coefficient min(max_norm / (norm +
// 1e-6), 1)); returns the norm as a device tensor (no host read).
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

// Newton-Schulz orthogonalisation in BF16 (5 steps, a, b, c = 3.4445, -4.7750, 2.0315) of a batch
// of matrices (n, rows, cols), rows <= cols.
torch::Tensor newton_schulz(const torch::Tensor& g, double eps = 1e-7);

class Optimizer {
 public:
  Optimizer(Kind kind, std::vector<ParamGroup> groups, double muon_scale = 0.2, double sgd_scale = 1.0);

  // prepare() is upload_hypers() (host values into the device table) and then prepare_update()
  // (device work only), so a recording can replay the latter after a native upload.
  void prepare() {
    upload_hypers();
    prepare_update();
  }
  void upload_hypers();
  void prepare_update();
  void orthogonalize();
  void apply() {
    apply_update();
    count_step();
  }
  // apply() in two parts: the device work (recordable), and the host's step count it leaves out
  // (a replayed step counts it natively after the replay).
  void apply_update();
  void count_step() { ++steps_; }
  void step();  // prepare, orthogonalize, apply (each an NVTX range)
  void zero_grad();

  // Sets a group's lr and momentum. The scalars every stage needs are derived on the host in double
  // precision (as the reference's Python scalars are) and copied in one transfer, at the next step,
  // into a device tensor the stages read: no stage reads a device value on the host.
  void set_hyper(size_t group, double lr, double momentum);

  Kind kind() const { return kind_; }
  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

  // Every state tensor (momentum buffers, moments, step counter, lr/momentum), named stably.
  std::vector<std::pair<std::string, torch::Tensor>> state();
  // Restores state() tensors by name (a checkpoint's): every name present with its shape, none unknown,
  // all finite.
  void load_state(const std::map<std::string, torch::Tensor>& tensors, const std::string& source);
  int64_t steps_taken() const { return steps_; }
  // Every optimised parameter, in slot order.
  std::vector<torch::Tensor> parameters() const;
  void set_steps_taken(int64_t n) { steps_ = n; }
  // Whether a group's arithmetic runs as multi-tensor kernels (on by default where they exist; off,
  // the per-tensor ops: tests compare the two).
  bool multi_tensor() const { return multi_tensor_; }
  void set_multi_tensor(bool on) { multi_tensor_ = on && multi_tensor_available_; }

 private:
  // Columns of the per-group scalar table.
  enum Hyper {
    kLr,
    kNegLr,
    kMomentum,
    kOneMinusMomentum,
    kNegMuonLr,
    kNegStepSize,
    kBias2Sqrt,
    kDecayFactor,
    kBias1,
    kBias2,
    kNadamGrad,
    kNadamAvg,
    kRadamRect,
    kRadamPlain,
    kHyperCount
  };

  torch::Tensor hyper(size_t group, Hyper h) const { return hypers_[static_cast<int64_t>(group)][h]; }

  struct Slot {  // one parameter with its state
    torch::Tensor param, buf, buf_sgd, exp_avg, exp_avg_sq, update;
    size_t group;
  };
  // The host scalars of the Adam family's step t (as torch.optim computes them in double).
  void adam_family_hypers(float* row, double lr, double beta1, double t) const;
  void prepare_slot(size_t gi, Slot& s);
  void apply_slot(size_t gi, Slot& s);
  // On a GPU, SGD, MuSGD, AdamW and Adam run a group's arithmetic as multi-tensor kernels
  // (optim/multi_tensor_cuda.h) where the build has them; on the CPU the per-tensor ops give the
  // reference's bytes (torch.optim's single-tensor forms). Each returns false where the group's
  // tensors do not suit the kernels, and the per-tensor ops run.
  bool prepare_group(size_t gi);
  bool apply_group(size_t gi);
#ifdef LUCID_CUDA_KERNELS
  cuda::GroupScalars group_scalars(size_t gi) const;
#endif
  bool multi_tensor_available_ = false, multi_tensor_ = false;
  Kind kind_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<Slot>> slots_;  // per group
  torch::Tensor hypers_;                  // (groups, kHyperCount) float32 on the device
  torch::Tensor step_;                    // optimizer steps taken (float32, device), saved with the state
  int64_t steps_ = 0;                     // its host mirror: the count is known without reading the device
  double muon_scale_, sgd_scale_;
  static constexpr double kBeta2 = 0.999, kAdamEps = 1e-8, kRmsAlpha = 0.99, kNadamMomentumDecay = 4e-3;
};

}  // namespace lucid::optim
