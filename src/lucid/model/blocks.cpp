#include "lucid/model/blocks.h"
#include "lucid/model/batch_norm_forward.h"
#include "lucid/model/depthwise.h"

#include <numeric>

namespace lucid::model {

namespace F = torch::nn::functional;

namespace {
thread_local FlopScope* g_flop_scope = nullptr;
}

FlopScope::FlopScope() : previous_(g_flop_scope) { g_flop_scope = this; }
FlopScope::~FlopScope() { g_flop_scope = previous_; }
void FlopScope::add(double ops) {
  if (g_flop_scope) g_flop_scope->total_ += ops;
}
bool FlopScope::active() { return g_flop_scope != nullptr; }

void count_conv(const torch::nn::Conv2dImpl& conv, const Tensor& out) {
  const auto& w = conv.weight;  // (Cout, Cin/g, kh, kw)
  FlopScope::add(static_cast<double>(out.numel()) * w.size(1) * w.size(2) * w.size(3));
}

namespace {
thread_local std::shared_ptr<torch::nn::SiLUImpl> g_silu_override;
}

std::shared_ptr<torch::nn::SiLUImpl> shared_silu() {
  static auto silu = std::make_shared<torch::nn::SiLUImpl>();
  return g_silu_override ? g_silu_override : silu;
}

SiluScope::SiluScope() : previous_(g_silu_override) { g_silu_override = std::make_shared<torch::nn::SiLUImpl>(); }
SiluScope::~SiluScope() { g_silu_override = previous_; }

ConvImpl::ConvImpl(int64_t c1, int64_t c2, int64_t k, int64_t s, int64_t g, bool act) : act_(act) {
  conv = register_module(
      "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, k).stride(s).padding(k / 2).groups(g).bias(false)));
  bn = register_module(
      "bn", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(c2).eps(kBatchNormEps).momentum(kBatchNormMomentum)));
  if (act)
    register_module("act", shared_silu());
  else
    register_module("act", torch::nn::Identity());
}

namespace {
BatchNormForward& batch_norm_override() {
  static BatchNormForward f;
  return f;
}
}  // namespace

void set_batch_norm_forward(BatchNormForward forward) { batch_norm_override() = std::move(forward); }
const BatchNormForward& batch_norm_forward() { return batch_norm_override(); }

Tensor ConvImpl::forward(const Tensor& x) {
  auto c = takes_depthwise_kernel(*conv, x) ? depthwise_forward(*conv, x) : conv(x);
  const auto& replaced = batch_norm_override();
  auto y = replaced && bn->is_training() ? replaced(*bn, c) : bn(c);
  if (FlopScope::active()) {
    count_conv(*conv, c);
    FlopScope::add(4.0 * static_cast<double>(c.numel()));
  }
  return act_ ? torch::silu(y) : y;
}

Conv DWConv(int64_t c1, int64_t c2, int64_t k, int64_t s, bool act) {
  return Conv(c1, c2, k, s, std::gcd(c1, c2), act);
}

BottleneckImpl::BottleneckImpl(int64_t c1, int64_t c2, bool shortcut, int64_t g, int64_t k1, int64_t k2, double e) {
  auto c_ = static_cast<int64_t>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, k1, 1));
  cv2 = register_module("cv2", Conv(c_, c2, k2, 1, g));
  add_ = shortcut && c1 == c2;
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  auto y = cv2(cv1(x));
  return add_ ? x + y : y;
}

C3Impl::C3Impl(int64_t c1, int64_t c2, int64_t n, bool shortcut, int64_t g, double e, int64_t k) {
  auto c_ = static_cast<int64_t>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1));
  cv2 = register_module("cv2", Conv(c1, c_, 1, 1));
  cv3 = register_module("cv3", Conv(2 * c_, c2, 1));
  m = register_module("m", Chain());
  for (int64_t i = 0; i < n; ++i)
    m->add(k > 0 ? Bottleneck(c_, c_, shortcut, g, k, k, 1.0) : Bottleneck(c_, c_, shortcut, g, 1, 3, 1.0));
}

Tensor C3Impl::forward(const Tensor& x) { return cv3(torch::cat({m(cv1(x)), cv2(x)}, 1)); }

AttentionImpl::AttentionImpl(int64_t dim, int64_t num_heads, double attn_ratio)
    : num_heads_(num_heads), head_dim_(dim / num_heads) {
  key_dim_ = static_cast<int64_t>(head_dim_ * attn_ratio);
  scale_ = std::pow(static_cast<double>(key_dim_), -0.5);
  int64_t h = dim + key_dim_ * num_heads * 2;
  qkv = register_module("qkv", Conv(dim, h, 1, 1, 1, false));
  proj = register_module("proj", Conv(dim, dim, 1, 1, 1, false));
  pe = register_module("pe", Conv(dim, dim, 3, 1, dim, false));
}

Tensor AttentionImpl::forward(const Tensor& x) {
  auto B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), N = H * W;
  auto parts =
      qkv(x).view({B, num_heads_, key_dim_ * 2 + head_dim_, N}).split_with_sizes({key_dim_, key_dim_, head_dim_}, 2);
  const auto &q = parts[0], &k = parts[1], &v = parts[2];
  auto attn = torch::matmul((q * scale_).transpose(-2, -1), k).softmax(-1);
  if (FlopScope::active()) FlopScope::add(static_cast<double>(B * num_heads_ * N * N * (key_dim_ + head_dim_)));
  auto y = torch::matmul(v, attn.transpose(-2, -1)).view({B, C, H, W}) + pe(v.reshape({B, C, H, W}));
  return proj(y);
}

PSABlockImpl::PSABlockImpl(int64_t c, double attn_ratio, int64_t num_heads, bool shortcut) : add_(shortcut) {
  attn = register_module("attn", Attention(c, num_heads, attn_ratio));
  ffn = register_module("ffn", Chain());
  ffn->add(Conv(c, c * 2, 1));
  ffn->add(Conv(c * 2, c, 1, 1, 1, false));
}

Tensor PSABlockImpl::forward(const Tensor& x) {
  auto y = add_ ? x + attn(x) : attn(x);
  return add_ ? y + ffn(y) : ffn(y);
}

C2fImpl::C2fImpl(int64_t c1, int64_t c2, int64_t n, bool shortcut, int64_t g, double e, InnerBlock inner) {
  c_ = static_cast<int64_t>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, 2 * c_, 1, 1));
  cv2 = register_module("cv2", Conv((2 + n) * c_, c2, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) {
    switch (inner) {
      case InnerBlock::Bottleneck3x3: {
        auto b = Bottleneck(c_, c_, shortcut, g, 3, 3, 1.0);
        m->push_back(b);
        blocks_.push_back([p = b.ptr()](const Tensor& x) { return p->forward(x); });
        break;
      }
      case InnerBlock::Bottleneck: {
        auto b = Bottleneck(c_, c_, shortcut, g);
        m->push_back(b);
        blocks_.push_back([p = b.ptr()](const Tensor& x) { return p->forward(x); });
        break;
      }
      case InnerBlock::C3k: {
        auto b = C3(c_, c_, 2, shortcut, g, 0.5, 3);
        m->push_back(b);
        blocks_.push_back([p = b.ptr()](const Tensor& x) { return p->forward(x); });
        break;
      }
      case InnerBlock::BottleneckPSA: {
        auto b = Chain();
        b->add(Bottleneck(c_, c_, shortcut, g));
        b->add(PSABlock(c_, 0.5, std::max<int64_t>(c_ / 64, 1)));
        m->push_back(b);
        blocks_.push_back([p = b.ptr()](const Tensor& x) { return p->forward(x); });
        break;
      }
    }
  }
}

Tensor C2fImpl::forward(const Tensor& x) {
  auto y = cv1(x).chunk(2, 1);
  std::vector<Tensor> parts(y.begin(), y.end());
  for (auto& block : blocks_) parts.push_back(block(parts.back()));
  return cv2(torch::cat(parts, 1));
}

SPPFImpl::SPPFImpl(int64_t c1, int64_t c2, int64_t k, int64_t n, bool shortcut, bool cv1_act) : n_(n) {
  auto c_ = c1 / 2;
  cv1 = register_module("cv1", Conv(c1, c_, 1, 1, 1, cv1_act));
  cv2 = register_module("cv2", Conv(c_ * (n + 1), c2, 1, 1));
  m = register_module("m", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(k).stride(1).padding(k / 2)));
  add_ = shortcut && c1 == c2;
}

Tensor SPPFImpl::forward(const Tensor& x) {
  std::vector<Tensor> y{cv1(x)};
  for (int64_t i = 0; i < n_; ++i) y.push_back(m(y.back()));
  auto out = cv2(torch::cat(y, 1));
  return add_ ? out + x : out;
}

C2PSAImpl::C2PSAImpl(int64_t c1, int64_t c2, int64_t n, double e) {
  TORCH_CHECK(c1 == c2, "C2PSA needs equal input and output channels");
  c_ = static_cast<int64_t>(c1 * e);
  cv1 = register_module("cv1", Conv(c1, 2 * c_, 1, 1));
  cv2 = register_module("cv2", Conv(2 * c_, c1, 1));
  m = register_module("m", Chain());
  for (int64_t i = 0; i < n; ++i) m->add(PSABlock(c_, 0.5, std::max<int64_t>(c_ / 64, 1)));
}

Tensor C2PSAImpl::forward(const Tensor& x) {
  auto ab = cv1(x).split_with_sizes({c_, c_}, 1);
  return cv2(torch::cat({ab[0], m(ab[1])}, 1));
}

DFLImpl::DFLImpl(int64_t c1) : c1_(c1) {
  conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, 1, 1).bias(false)));
  torch::NoGradGuard no_grad;
  conv->weight.copy_(torch::arange(c1, torch::kFloat).view({1, c1, 1, 1}));
  conv->weight.set_requires_grad(false);
}

Tensor DFLImpl::forward(const Tensor& x) {
  auto b = x.size(0), a = x.size(2);
  auto y = conv(x.view({b, 4, c1_, a}).transpose(2, 1).softmax(1));
  if (FlopScope::active()) count_conv(*conv, y);
  return y.view({b, 4, a});
}

Tensor UpsampleImpl::forward(const Tensor& x) {
  return F::interpolate(
      x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{scale_, scale_}).mode(torch::kNearest));
}

ProtoImpl::ProtoImpl(int64_t c1, int64_t c_, int64_t c2) {
  cv1 = register_module("cv1", Conv(c1, c_, 3));
  upsample = register_module(
      "upsample",
      torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(c_, c_, 2).stride(2).padding(0).bias(true)));
  cv2 = register_module("cv2", Conv(c_, c_, 3));
  cv3 = register_module("cv3", Conv(c_, c2, 1));
}

Tensor ProtoImpl::forward(const Tensor& x) {
  auto h = cv1(x);
  auto u = upsample(h);
  if (FlopScope::active()) {           // transposed conv: input volume x output channels x kernel area
    const auto& w = upsample->weight;  // (Cin, Cout, kh, kw)
    FlopScope::add(static_cast<double>(h.numel()) * w.size(1) * w.size(2) * w.size(3));
  }
  return cv3(cv2(u));
}

Proto26Impl::Proto26Impl(const std::vector<int64_t>& ch, int64_t c_, int64_t c2, int64_t nc) : ProtoImpl(c_, c_, c2) {
  feat_refine = register_module("feat_refine", torch::nn::ModuleList());
  for (size_t i = 1; i < ch.size(); ++i) {
    refine_.push_back(Conv(ch[i], ch[0], 1));
    feat_refine->push_back(refine_.back());
  }
  feat_fuse = register_module("feat_fuse", Conv(ch[0], c_, 3));
  semseg = register_module("semseg", Chain());
  semseg->add(Conv(ch[0], c_, 3));
  semseg->add(Conv(c_, c_, 3));
  semseg->add(torch::nn::Conv2d(torch::nn::Conv2dOptions(c_, nc, 1)));
}

std::pair<Tensor, Tensor> Proto26Impl::forward_multi(const std::vector<Tensor>& x, bool with_semantic) {
  auto feat = x[0];
  for (size_t i = 0; i < refine_.size(); ++i) {
    double factor = static_cast<double>(int64_t{1} << (i + 1));
    auto up = F::interpolate(
        refine_[i](x[i + 1]),
        F::InterpolateFuncOptions().scale_factor(std::vector<double>{factor, factor}).mode(torch::kNearest));
    feat = feat + up;
  }
  auto protos = ProtoImpl::forward(feat_fuse(feat));
  return {protos, with_semantic ? semseg(feat) : Tensor()};
}

namespace {

struct GradLayout : torch::autograd::Function<GradLayout> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& t) {
    ctx->saved_data["format"] = static_cast<int64_t>(t.suggest_memory_format());
    ctx->set_materialize_grads(false);
    return {t.view_as(t)};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (!grads[0].defined()) return {Tensor()};
    return {grads[0].contiguous(static_cast<at::MemoryFormat>(ctx->saved_data["format"].toInt()))};
  }
};

}  // namespace

Tensor with_grad_layout(const Tensor& t) {
  if (!t.requires_grad() || !torch::GradMode::is_enabled()) return t;
  return GradLayout::apply(t)[0];
}

}  // namespace lucid::model
