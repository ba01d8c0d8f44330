// Building blocks of the YOLO family, with the reference implementation's module names, so state
// dicts carry over key for key. Every block is a LibTorch module; composite blocks register their
// children under the reference's attribute names (cv1, cv2, m.0, ...).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

namespace lucid::model {

using torch::Tensor;

// The reference sets these on every BatchNorm after building.
inline constexpr double kBatchNormEps = 1e-3;
inline constexpr double kBatchNormMomentum = 0.03;

// Operation counting for `model info` (the reference's thop rules: conv multiply-adds, 4 ops per
// affine BatchNorm element, attention products), active only inside a FlopScope on this thread.
class FlopScope {
 public:
  FlopScope();
  ~FlopScope();
  double multiply_adds() const { return total_; }
  static void add(double ops);
  static bool active();

 private:
  double total_ = 0;
  FlopScope* previous_;
};
void count_conv(const torch::nn::Conv2dImpl& conv, const Tensor& out);

// Gradients reaching the result arrive in t's own memory format, whichever layout the consumer's
// backward produced. BatchNorm backward reduces in a layout-dependent order, so this pins the
// gradient bits of the stage outputs to one layout whatever reads them (the loss natively, a copy
// into a recording's buffer under stage replay). The forward is an alias of t.
Tensor with_grad_layout(const Tensor& t);

// One SiLU instance shared by every Conv, as in the reference, where it is counted once as a layer.
// Deep copies in the reference (the one-to-one head branches) each carry their own instance; a
// SiluScope makes Convs built inside it share a fresh one.
std::shared_ptr<torch::nn::SiLUImpl> shared_silu();
class SiluScope {
 public:
  SiluScope();
  ~SiluScope();

 private:
  std::shared_ptr<torch::nn::SiLUImpl> previous_;
};

// Conv2d (no bias, "same" padding) -> BatchNorm2d -> SiLU (or identity when act is false).
class ConvImpl : public torch::nn::Module {
 public:
  ConvImpl(int64_t c1, int64_t c2, int64_t k = 1, int64_t s = 1, int64_t g = 1, bool act = true);
  Tensor forward(const Tensor& x);

  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};

 private:
  bool act_;
};
TORCH_MODULE(Conv);

// Depthwise-style Conv: groups = gcd(c1, c2).
Conv DWConv(int64_t c1, int64_t c2, int64_t k = 1, int64_t s = 1, bool act = true);

// Ordered children "0", "1", ... applied in turn (the reference's nn.Sequential).
class ChainImpl : public torch::nn::Module {
 public:
  template <class M>
  void add(M module) {
    auto ptr = module.ptr();
    register_module(std::to_string(steps_.size()), ptr);
    if constexpr (std::is_same_v<M, torch::nn::Conv2d>) {
      steps_.push_back([ptr](const Tensor& x) {
        auto y = ptr->forward(x);
        if (FlopScope::active()) count_conv(*ptr, y);
        return y;
      });
    } else {
      steps_.push_back([ptr](const Tensor& x) { return ptr->forward(x); });
    }
  }
  Tensor forward(Tensor x) {
    for (auto& step : steps_) x = step(x);
    return x;
  }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};
TORCH_MODULE(Chain);

class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int64_t c1, int64_t c2, bool shortcut = true, int64_t g = 1, int64_t k1 = 3, int64_t k2 = 3,
                 double e = 0.5);
  Tensor forward(const Tensor& x);
  bool adds() const { return add_; }  // the residual x + cv2(cv1(x))

 private:
  Conv cv1{nullptr}, cv2{nullptr};
  bool add_;
};
TORCH_MODULE(Bottleneck);

// CSP bottleneck with 3 convolutions; C3k is the same with k x k inner bottlenecks.
class C3Impl : public torch::nn::Module {
 public:
  C3Impl(int64_t c1, int64_t c2, int64_t n = 1, bool shortcut = true, int64_t g = 1, double e = 0.5,
         int64_t k = 0 /* 0: plain C3 (1x1, 3x3); >0: C3k with k x k */);
  Tensor forward(const Tensor& x);

 private:
  Conv cv1{nullptr}, cv2{nullptr}, cv3{nullptr};
  Chain m{nullptr};
};
TORCH_MODULE(C3);

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t num_heads = 8, double attn_ratio = 0.5);
  Tensor forward(const Tensor& x);
  int64_t heads() const { return num_heads_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t head_dim() const { return head_dim_; }
  double scale() const { return scale_; }

 private:
  int64_t num_heads_, head_dim_, key_dim_;
  double scale_;
  Conv qkv{nullptr}, proj{nullptr}, pe{nullptr};
};
TORCH_MODULE(Attention);

class PSABlockImpl : public torch::nn::Module {
 public:
  PSABlockImpl(int64_t c, double attn_ratio = 0.5, int64_t num_heads = 4, bool shortcut = true);
  Tensor forward(const Tensor& x);
  bool adds() const { return add_; }

 private:
  Attention attn{nullptr};
  Chain ffn{nullptr};
  bool add_;
};
TORCH_MODULE(PSABlock);

// Inner block kinds of C2f / C3k2.
enum class InnerBlock { Bottleneck3x3, Bottleneck, C3k, BottleneckPSA };

// C2f skeleton: split in two, chain n inner blocks, concat all, fuse. C3k2 picks the inner block.
class C2fImpl : public torch::nn::Module {
 public:
  C2fImpl(int64_t c1, int64_t c2, int64_t n, bool shortcut, int64_t g, double e, InnerBlock inner);
  Tensor forward(const Tensor& x);

 private:
  int64_t c_;
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};
  std::vector<std::function<Tensor(const Tensor&)>> blocks_;
};
TORCH_MODULE(C2f);

class SPPFImpl : public torch::nn::Module {
 public:
  // cv1_act: cv1 with the shared SiLU (YOLOv8/11 rows) instead of none (YOLO26).
  SPPFImpl(int64_t c1, int64_t c2, int64_t k = 5, int64_t n = 3, bool shortcut = false, bool cv1_act = false);
  Tensor forward(const Tensor& x);
  int64_t pools() const { return n_; }
  bool adds() const { return add_; }

 private:
  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::MaxPool2d m{nullptr};
  int64_t n_;
  bool add_;
};
TORCH_MODULE(SPPF);

class C2PSAImpl : public torch::nn::Module {
 public:
  C2PSAImpl(int64_t c1, int64_t c2, int64_t n = 1, double e = 0.5);
  Tensor forward(const Tensor& x);

 private:
  int64_t c_;
  Conv cv1{nullptr}, cv2{nullptr};
  Chain m{nullptr};
};
TORCH_MODULE(C2PSA);

// torch.cat of the inputs along one dimension (the reference's Concat).
class ConcatImpl : public torch::nn::Module {
 public:
  explicit ConcatImpl(int64_t d) : d_(d) {}
  Tensor forward(const std::vector<Tensor>& x) { return torch::cat(x, d_); }
  int64_t dim() const { return d_; }

 private:
  int64_t d_;
};
TORCH_MODULE(Concat);

// Nearest-neighbour upsampling by a scale factor (the reference's nn.Upsample).
class UpsampleImpl : public torch::nn::Module {
 public:
  explicit UpsampleImpl(double scale) : scale_(scale) {}
  Tensor forward(const Tensor& x);
  double scale() const { return scale_; }

 private:
  double scale_;
};
TORCH_MODULE(Upsample);

// Fixed expectation over reg_max bins (weights 0..c1-1, never trained).
class DFLImpl : public torch::nn::Module {
 public:
  explicit DFLImpl(int64_t c1 = 16);
  Tensor forward(const Tensor& x);  // (B, 4*c1, A) -> (B, 4, A)

  torch::nn::Conv2d conv{nullptr};

 private:
  int64_t c1_;
};
TORCH_MODULE(DFL);

// Mask prototypes: 3x3 conv, 2x transposed conv, 3x3 conv, 1x1 conv to nm channels.
class ProtoImpl : public torch::nn::Module {
 public:
  ProtoImpl(int64_t c1, int64_t c_ = 256, int64_t c2 = 32);
  Tensor forward(const Tensor& x);

 protected:
  Conv cv1{nullptr};
  torch::nn::ConvTranspose2d upsample{nullptr};
  Conv cv2{nullptr}, cv3{nullptr};
};
TORCH_MODULE(Proto);

// YOLO26 prototypes: P4/P5 refined and added onto P3, then Proto; plus a semantic branch used only
// in training.
class Proto26Impl : public ProtoImpl {
 public:
  Proto26Impl(const std::vector<int64_t>& ch, int64_t c_, int64_t c2, int64_t nc);
  // Returns {protos, semantic}; semantic is undefined unless with_semantic.
  std::pair<Tensor, Tensor> forward_multi(const std::vector<Tensor>& x, bool with_semantic);

 private:
  torch::nn::ModuleList feat_refine{nullptr};
  std::vector<Conv> refine_;
  Conv feat_fuse{nullptr};
  Chain semseg{nullptr};
};
TORCH_MODULE(Proto26);

}  // namespace lucid::model
