#include "lucid/optim/optimizer.h"

#include "lucid/util/trace.h"

#ifdef LUCID_CUDA_KERNELS
#include "lucid/optim/multi_tensor_cuda.h"
#endif

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "lucid/model/model.h"
#include "lucid/util/error.h"

namespace lucid::optim {

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::SGD:
      return "SGD";
    case Kind::AdamW:
      return "AdamW";
    case Kind::MuSGD:
      return "MuSGD";
    case Kind::Adam:
      return "Adam";
    case Kind::Adamax:
      return "Adamax";
    case Kind::NAdam:
      return "NAdam";
    case Kind::RAdam:
      return "RAdam";
    case Kind::RMSprop:
      return "RMSprop";
  }
  return "?";
}

bool uses_betas(Kind k) {
  return k == Kind::AdamW || k == Kind::Adam || k == Kind::Adamax || k == Kind::NAdam || k == Kind::RAdam;
}

OptimizerChoice choose_optimizer(const std::string& name, double lr0, double momentum, int64_t nc, int64_t iterations) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "auto") {
    // lr fitted to the class count, rounded to 6 decimals as the reference does.
    double lr_fit = std::round(0.002 * 5 / (4 + nc) * 1e6) / 1e6;
    if (iterations > 10000) return {Kind::MuSGD, 0.01, 0.9, true};
    return {Kind::AdamW, lr_fit, 0.9, true};
  }
  if (n == "sgd") return {Kind::SGD, lr0, momentum, false};
  if (n == "adamw") return {Kind::AdamW, lr0, momentum, false};
  if (n == "musgd") return {Kind::MuSGD, lr0, momentum, false};
  for (Kind k : {Kind::Adam, Kind::Adamax, Kind::NAdam, Kind::RAdam, Kind::RMSprop}) {
    std::string kn;
    for (char c : kind_name(k)) kn += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == kn) return {k, lr0, momentum, false};
  }
  throw UserError("optimizer=" + name + ": expected auto, SGD, MuSGD, Adam, Adamax, AdamW, NAdam, RAdam or RMSProp");
}

std::vector<ParamGroup> build_param_groups(model::SegmentationModelImpl& model, Kind kind, double lr, double momentum,
                                           double decay) {
  const bool muon = kind == Kind::MuSGD;
  // Reference order: weight (decay), bn, bias, muon.
  std::vector<ParamGroup> base(4);
  base[0].name = "weight";
  base[0].weight_decay = decay;
  base[1].name = "bn";
  base[2].name = "bias";
  base[2].is_bias = true;
  base[3].name = "muon";
  base[3].weight_decay = decay;
  base[3].use_muon = true;
  for (const auto& item : model.named_modules()) {
    const bool is_norm = item.value()->as<torch::nn::BatchNorm2dImpl>() != nullptr;
    for (const auto& p : item.value()->named_parameters(false)) {
      if (!p.value().requires_grad()) continue;
      std::string full = item.key().empty() ? p.key() : item.key() + "." + p.key();
      int g = (muon && (p.value().dim() == 2 || p.value().dim() == 4)) ? 3
              : full.find("bias") != std::string::npos                 ? 2
              : is_norm                                                ? 1
                                                                       : 0;
      base[g].params.push_back(p.value());
      base[g].param_names.push_back(full);
    }
  }
  if (!muon) {
    base.resize(3);
    for (auto& g : base) g.initial_lr = lr;
    return base;
  }
  // MuSGD: class branches and the semantic branch learn at 3x.
  const std::string head = "model." + std::to_string(model.spec().layers.size() - 1) + ".";
  auto boosted = [&](const std::string& n) {
    return n.rfind(head + "cv3.", 0) == 0 || n.rfind(head + "one2one_cv3.", 0) == 0 ||
           n.find("proto.semseg") != std::string::npos;
  };
  std::vector<ParamGroup> out;
  for (auto& g : base) {
    ParamGroup boost = g, plain = g;
    boost.name += "-boost";
    boost.params.clear();
    boost.param_names.clear();
    plain.params.clear();
    plain.param_names.clear();
    boost.initial_lr = lr * 3;
    plain.initial_lr = lr;
    for (size_t i = 0; i < g.params.size(); ++i) {
      auto& dst = boosted(g.param_names[i]) ? boost : plain;
      dst.params.push_back(g.params[i]);
      dst.param_names.push_back(g.param_names[i]);
    }
    out.push_back(std::move(boost));
    out.push_back(std::move(plain));
  }
  (void)momentum;
  return out;
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({});
  auto norms = torch::_foreach_norm(grads, 2);
  auto total = torch::linalg_vector_norm(torch::stack(norms), 2);
  auto coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
  torch::_foreach_mul_(grads, coef);
  return total;
}

torch::Tensor newton_schulz(const torch::Tensor& g, double eps) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  auto x = g.reshape({-1, g.size(-2), g.size(-1)}).to(torch::kBFloat16);
  x = x / (torch::linalg_vector_norm(x, 2, std::vector<int64_t>{-2, -1}, true) + eps);
  const bool transpose = g.size(-2) > g.size(-1);
  if (transpose) x = x.transpose(-2, -1);
  for (int i = 0; i < 5; ++i) {
    auto A = torch::bmm(x, x.transpose(-2, -1));
    auto B = torch::baddbmm(A, A, A, b, c);
    x = torch::baddbmm(x, B, x, a, 1.0);
  }
  if (transpose) x = x.transpose(-2, -1);
  return x.reshape(g.sizes());
}

Optimizer::Optimizer(Kind kind, std::vector<ParamGroup> groups, double muon_scale, double sgd_scale)
    : kind_(kind), groups_(std::move(groups)), muon_scale_(muon_scale), sgd_scale_(sgd_scale) {
  torch::Device device(torch::kCPU);
  for (const auto& g : groups_)
    if (!g.params.empty()) device = g.params.front().device();
  hypers_ = torch::zeros({static_cast<int64_t>(groups_.size()), kHyperCount},
                         torch::TensorOptions().dtype(torch::kFloat).device(device));
  step_ = torch::zeros({}, hypers_.options());
#ifdef LUCID_CUDA_KERNELS
  multi_tensor_available_ =
      device.is_cuda() && (kind_ == Kind::SGD || kind_ == Kind::MuSGD || kind_ == Kind::AdamW || kind_ == Kind::Adam);
#endif
  multi_tensor_ = multi_tensor_available_;
  slots_.resize(groups_.size());
  torch::NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& p : groups_[gi].params) {
      Slot s;
      s.param = p;
      s.group = gi;
      if (uses_betas(kind_)) {
        s.exp_avg = torch::zeros_like(p, at::MemoryFormat::Preserve);
        s.exp_avg_sq = torch::zeros_like(p, at::MemoryFormat::Preserve);  // Adamax: the infinity norm
      } else if (kind_ == Kind::RMSprop) {
        s.exp_avg_sq = torch::zeros_like(p, at::MemoryFormat::Preserve);  // square_avg
        s.buf = torch::zeros_like(p, at::MemoryFormat::Preserve);
      } else {
        s.buf = torch::zeros_like(p, at::MemoryFormat::Preserve);
        if (groups_[gi].use_muon) s.buf_sgd = torch::zeros_like(p, at::MemoryFormat::Preserve);
        // The prepared update lives in one buffer for the optimizer's life, so a recorded
        // preparation writes where the native apply() reads.
        s.update = torch::zeros_like(p, at::MemoryFormat::Preserve);
      }
      slots_[gi].push_back(std::move(s));
    }
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) set_hyper(gi, groups_[gi].initial_lr, 0.0);
}

void Optimizer::set_hyper(size_t group, double lr, double momentum) {
  groups_[group].current_lr = lr;
  groups_[group].current_momentum = momentum;
}

void Optimizer::upload_hypers() {
  // One row per group, computed in double from the host values, rounded once to float32.
  auto host = torch::zeros({static_cast<int64_t>(groups_.size()), kHyperCount}, torch::kFloat);  // unused columns 0
  auto h = host.accessor<float, 2>();
  const double t = static_cast<double>(steps_ + 1);  // AdamW's step count after this step
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& g = groups_[gi];
    const double lr = g.current_lr, m = g.current_momentum;
    h[gi][kLr] = static_cast<float>(lr);
    h[gi][kNegLr] = static_cast<float>(-(lr * (g.use_muon ? sgd_scale_ : 1.0)));
    h[gi][kMomentum] = static_cast<float>(m);
    h[gi][kOneMinusMomentum] = static_cast<float>(1 - m);
    h[gi][kNegMuonLr] = static_cast<float>(-(lr * muon_scale_));
    h[gi][kNegStepSize] = static_cast<float>(-(lr / (1 - std::pow(m, t))));
    h[gi][kBias2Sqrt] = static_cast<float>(std::sqrt(1 - std::pow(kBeta2, t)));
    h[gi][kDecayFactor] = static_cast<float>(1 - lr * g.weight_decay);
    if (uses_betas(kind_)) adam_family_hypers(&h[gi][0], lr, m, t);
  }
  if (hypers_.is_cuda()) host = host.pin_memory();
  hypers_.copy_(host, /*non_blocking=*/true);
}

void Optimizer::adam_family_hypers(float* row, double lr, double beta1, double t) const {
  const double bias1 = 1 - std::pow(beta1, t), bias2 = 1 - std::pow(kBeta2, t);
  row[kBias1] = static_cast<float>(bias1);
  row[kBias2] = static_cast<float>(bias2);
  if (kind_ == Kind::NAdam) {
    // torch.optim keeps mu_product as a float32 tensor multiplied by each step's mu; every parameter
    // has taken the same steps, so it is one product, recomputed from the step count.
    auto mu_at = [&](double step) { return beta1 * (1.0 - 0.5 * std::pow(0.96, step * kNadamMomentumDecay)); };
    float product = 1.0f;
    for (int64_t k = 1; k <= static_cast<int64_t>(t); ++k) product *= static_cast<float>(mu_at(static_cast<double>(k)));
    const double mu = mu_at(t), mu_next = mu_at(t + 1), product_next = static_cast<double>(product) * mu_next;
    row[kNadamGrad] = static_cast<float>(-lr * (1.0 - mu) / (1.0 - static_cast<double>(product)));
    row[kNadamAvg] = static_cast<float>((-lr * mu_next) / (1.0 - product_next));
  }
  if (kind_ == Kind::RAdam) {
    // The rectified step where the variance is tractable (rho_t > 5), else the plain momentum step:
    // both kept as factors so that a recorded update takes either without a host branch.
    const double rho_inf = 2 / (1 - kBeta2) - 1, rho_t = rho_inf - 2 * t * std::pow(kBeta2, t) / bias2;
    const bool rectified = rho_t > 5.0;
    const double rect =
        rectified ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0;
    row[kRadamRect] = static_cast<float>(rectified ? std::sqrt(bias2) * rect : 0.0);
    row[kRadamPlain] = rectified ? 0.0f : 1.0f;
  }
}

void Optimizer::prepare_update() {
  torch::NoGradGuard no_grad;
  step_.add_(1);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (multi_tensor_ && prepare_group(gi)) continue;
    for (auto& s : slots_[gi]) {
      if (s.param.grad().defined()) prepare_slot(gi, s);
    }
  }
}

void Optimizer::prepare_slot(size_t gi, Slot& s) {
  const auto& g = groups_[gi];
  const auto& grad = s.param.grad();
  auto m = hyper(gi, kMomentum), omm = hyper(gi, kOneMinusMomentum);
  if (kind_ == Kind::AdamW) {
    s.exp_avg.lerp_(grad, omm);
    s.exp_avg_sq.mul_(kBeta2).addcmul_(grad, grad, 1 - kBeta2);
  } else if (uses_betas(kind_)) {
    // The rest of the Adam family: L2 weight decay on the gradient (torch.optim's default).
    auto d = g.weight_decay != 0 ? torch::add(grad, s.param, g.weight_decay) : grad;
    s.exp_avg.lerp_(d, omm);
    if (kind_ == Kind::Adamax)
      torch::maximum_out(s.exp_avg_sq, s.exp_avg_sq.mul_(kBeta2), d.abs().add_(kAdamEps));
    else
      s.exp_avg_sq.mul_(kBeta2).addcmul_(d, d, 1 - kBeta2);
  } else if (kind_ == Kind::RMSprop) {
    auto d = g.weight_decay != 0 ? torch::add(grad, s.param, g.weight_decay) : grad;
    s.exp_avg_sq.mul_(kRmsAlpha).addcmul_(d, d, 1 - kRmsAlpha);
    s.buf.mul_(m).addcdiv_(d, s.exp_avg_sq.sqrt().add_(kAdamEps));
  } else if (g.use_muon) {
    // Muon momentum in EMA form and its Nesterov update; the SGD part follows in apply(),
    // after the Muon update has moved the parameter.
    // addcmul with a 0-d factor rounds once, as the reference's add with a scalar alpha does.
    s.buf.mul_(m).addcmul_(grad, omm);
    torch::addcmul_out(s.update, s.buf * m, grad, omm);
  } else {
    auto d = g.weight_decay != 0 ? torch::add(grad, s.param, g.weight_decay) : grad;
    s.buf.mul_(m).add_(d);
    torch::addcmul_out(s.update, d, s.buf, m);  // Nesterov: d + momentum * buf
  }
}

void Optimizer::orthogonalize() {
  if (kind_ != Kind::MuSGD) return;
  torch::NoGradGuard no_grad;
  // As the reference batches them: each update flattened to (rows, columns) in its own memory order
  // (a view for contiguous and channels_last kernels: permuted columns come out permuted alike),
  // bucketed by (columns, scale, dtype), each bucket sorted by descending rows and split where the
  // rows span more than 16x, each part zero-padded on rows into one batched Newton-Schulz. The
  // padded shapes decide the BF16 rounding, so they must be the reference's.
  struct Item {
    Slot* slot;
    torch::Tensor m;
    bool aliases_update;  // m is a view of the update (else a row-major copy)
  };
  struct Bucket {
    int64_t cols;
    double scale;
    torch::ScalarType dtype;
    std::vector<Item> items;
  };
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (!groups_[gi].use_muon) continue;
    std::vector<Bucket> buckets;  // per group, in parameter order
    for (auto& s : slots_[gi]) {
      if (!s.param.grad().defined()) continue;
      const auto& u = s.update;
      const bool dense = u.is_contiguous();
      const bool nhwc = !dense && u.dim() == 4 && u.is_contiguous(at::MemoryFormat::ChannelsLast);
      auto m = nhwc ? u.permute({0, 2, 3, 1}).flatten(1) : u.dim() > 2 ? u.flatten(1) : u.contiguous();
      // pow(x, 0.5) as the reference's `** 0.5`.
      const double scale =
          std::pow(std::max(1.0, static_cast<double>(u.size(-2)) / static_cast<double>(u.size(-1))), 0.5);
      auto it = std::find_if(buckets.begin(), buckets.end(), [&](const Bucket& b) {
        return b.cols == m.size(1) && b.scale == scale && b.dtype == m.scalar_type();
      });
      if (it == buckets.end()) it = buckets.insert(buckets.end(), Bucket{m.size(1), scale, m.scalar_type(), {}});
      it->items.push_back({&s, m, dense || nhwc});
    }
    for (auto& b : buckets) {
      auto& items = b.items;
      std::stable_sort(items.begin(), items.end(),
                       [](const Item& x, const Item& y) { return x.m.size(0) > y.m.size(0); });
      for (size_t start = 0, j = 1; j <= items.size(); ++j) {
        if (j < items.size() && items[start].m.size(0) <= 16 * items[j].m.size(0)) continue;
        const auto n = static_cast<int64_t>(j - start);
        auto x = torch::zeros({n, items[start].m.size(0), b.cols}, items[start].m.options());
        std::vector<torch::Tensor> rows, sources;
        for (size_t k = start; k < j; ++k) {
          rows.push_back(x[static_cast<int64_t>(k - start)].slice(0, 0, items[k].m.size(0)));
          sources.push_back(items[k].m);
        }
        torch::_foreach_add_(rows, sources);  // the reference's fill (a signed zero becomes +0)
        x = newton_schulz(x).contiguous().to(items[start].slot->param.grad().scalar_type()).mul_(b.scale);
        for (size_t k = start; k < j; ++k) {
          auto o = x[static_cast<int64_t>(k - start)].slice(0, 0, items[k].m.size(0));
          auto& s = *items[k].slot;
          if (items[k].aliases_update)
            items[k].m.copy_(o);
          else
            s.update.copy_(o.reshape(s.param.sizes()));
        }
        start = j;
      }
    }
  }
}

void Optimizer::apply_update() {
  torch::NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (multi_tensor_ && apply_group(gi)) continue;
    for (auto& s : slots_[gi])
      if (s.param.grad().defined()) apply_slot(gi, s);
  }
}

void Optimizer::apply_slot(size_t gi, Slot& s) {
  const auto& g = groups_[gi];
  const auto& grad = s.param.grad();
  auto m = hyper(gi, kMomentum), neg_lr = hyper(gi, kNegLr);
  switch (kind_) {
    case Kind::AdamW:
    case Kind::Adam: {
      if (kind_ == Kind::AdamW && g.weight_decay != 0) s.param.mul_(hyper(gi, kDecayFactor));
      auto denom = (s.exp_avg_sq.sqrt() / hyper(gi, kBias2Sqrt)).add_(kAdamEps);
      s.param.addcdiv_(s.exp_avg * hyper(gi, kNegStepSize), denom);
      return;
    }
    case Kind::Adamax:
      s.param.addcdiv_(s.exp_avg * hyper(gi, kNegStepSize), s.exp_avg_sq);  // exp_avg_sq: the infinity norm
      return;
    case Kind::NAdam: {
      auto d = g.weight_decay != 0 ? torch::add(grad, s.param, g.weight_decay) : grad;
      auto denom = s.exp_avg_sq.div(hyper(gi, kBias2)).sqrt().add_(kAdamEps);
      s.param.addcdiv_(d * hyper(gi, kNadamGrad), denom);
      s.param.addcdiv_(s.exp_avg * hyper(gi, kNadamAvg), denom);
      return;
    }
    case Kind::RAdam: {
      auto step = s.exp_avg / hyper(gi, kBias1) * hyper(gi, kLr);
      auto adaptive = hyper(gi, kRadamRect) / s.exp_avg_sq.sqrt().add_(kAdamEps) + hyper(gi, kRadamPlain);
      s.param.sub_(step * adaptive);
      return;
    }
    case Kind::RMSprop:
      s.param.addcmul_(s.buf, neg_lr);
      return;
    case Kind::MuSGD: {
      if (!g.use_muon) break;  // its other groups take the SGD step
      s.param.addcmul_(s.update, hyper(gi, kNegMuonLr));
      // Then a Nesterov SGD step with its own buffer, weight decay on the moved parameter.
      auto d = g.weight_decay != 0 ? torch::add(grad, s.param, g.weight_decay) : grad;
      s.buf_sgd.mul_(m).add_(d);
      s.param.addcmul_(torch::addcmul(d, s.buf_sgd, m), neg_lr);
      return;
    }
    case Kind::SGD:
      break;
  }
  s.param.addcmul_(s.update, neg_lr);
}

void Optimizer::step() {
  {
    util::TraceRange range("optimizer prepare");
    prepare();
  }
  {
    util::TraceRange range("optimizer orthogonalize");
    orthogonalize();
  }
  util::TraceRange range("optimizer apply");
  apply();
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params) p.mutable_grad() = torch::Tensor();
}

std::vector<std::pair<std::string, torch::Tensor>> Optimizer::state() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.emplace_back("step", step_);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < slots_[gi].size(); ++i) {
      const auto& s = slots_[gi][i];
      const auto prefix = groups_[gi].name + "/" + groups_[gi].param_names[i] + ".";
      if (s.buf.defined()) out.emplace_back(prefix + "momentum_buffer", s.buf);
      if (s.buf_sgd.defined()) out.emplace_back(prefix + "momentum_buffer_SGD", s.buf_sgd);
      if (s.exp_avg.defined()) out.emplace_back(prefix + "exp_avg", s.exp_avg);
      // torch.optim's names: Adamax's exp_inf, RMSprop's square_avg.
      const char* second = kind_ == Kind::Adamax ? "exp_inf" : kind_ == Kind::RMSprop ? "square_avg" : "exp_avg_sq";
      if (s.exp_avg_sq.defined()) out.emplace_back(prefix + second, s.exp_avg_sq);
    }
  }
  return out;
}

}  // namespace lucid::optim

namespace lucid::optim {

void Optimizer::load_state(const std::map<std::string, torch::Tensor>& tensors, const std::string& source) {
  torch::NoGradGuard no_grad;
  auto own = state();
  std::set<std::string> names;
  for (auto& [name, t] : own) names.insert(name);
  for (const auto& [name, t] : tensors)
    if (!names.count(name)) throw UserError(source + ": unexpected optimizer state '" + name + "'");
  for (auto& [name, t] : own) {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.sizes() != t.sizes())
      throw UserError(source + ": optimizer state '" + name + "' is missing or mis-shaped");
    if (it->second.is_floating_point() && !torch::isfinite(it->second).all().item<bool>())
      throw UserError(source + ": optimizer state '" + name + "' holds NaN or infinite values");
    t.copy_(it->second);
  }
}

}  // namespace lucid::optim

namespace lucid::optim {

std::vector<torch::Tensor> Optimizer::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& group : slots_)
    for (const auto& s : group) out.push_back(s.param);
  return out;
}

}  // namespace lucid::optim

namespace lucid::optim {

// The multi-tensor forms of prepare_slot and apply_slot for a whole group (optim/multi_tensor_cuda.h):
// false where there are none (the build has no kernels, or the tensors are not laid out for them),
// and the per-tensor ops run instead.
#ifdef LUCID_CUDA_KERNELS
bool Optimizer::prepare_group(size_t gi) {
  if (uses_betas(kind_)) return true;  // adam_step in apply_group updates the moments too
  const bool muon = groups_[gi].use_muon;
  cuda::TensorLists lists(muon ? 3 : 4);
  for (auto& s : slots_[gi]) {
    if (!s.param.grad().defined()) continue;
    size_t k = 0;
    lists[k++].push_back(s.param.grad());
    if (!muon) lists[k++].push_back(s.param);
    lists[k++].push_back(s.buf);
    lists[k].push_back(s.update);
  }
  return muon ? cuda::muon_prepare(std::move(lists), group_scalars(gi))
              : cuda::sgd_prepare(std::move(lists), group_scalars(gi));
}

bool Optimizer::apply_group(size_t gi) {
  const bool adam = uses_betas(kind_), muon = groups_[gi].use_muon;
  cuda::TensorLists lists(adam || muon ? 4 : 2);
  for (auto& s : slots_[gi]) {
    if (!s.param.grad().defined()) continue;
    lists[0].push_back(s.param);
    if (adam) {
      lists[1].push_back(s.param.grad());
      lists[2].push_back(s.exp_avg);
      lists[3].push_back(s.exp_avg_sq);
    } else if (muon) {
      lists[1].push_back(s.param.grad());
      lists[2].push_back(s.update);
      lists[3].push_back(s.buf_sgd);
    } else {
      lists[1].push_back(s.update);
    }
  }
  if (adam) return cuda::adam_step(std::move(lists), group_scalars(gi), kind_ == Kind::AdamW);
  return muon ? cuda::muon_apply(std::move(lists), group_scalars(gi))
              : cuda::sgd_apply(std::move(lists), group_scalars(gi));
}

cuda::GroupScalars Optimizer::group_scalars(size_t gi) const {
  const float* row = hypers_.data_ptr<float>() + static_cast<int64_t>(gi) * kHyperCount;
  cuda::GroupScalars s;
  s.momentum = row + kMomentum;
  s.one_minus_momentum = row + kOneMinusMomentum;
  s.neg_lr = row + kNegLr;
  s.neg_muon_lr = row + kNegMuonLr;
  s.neg_step_size = row + kNegStepSize;
  s.bias2_sqrt = row + kBias2Sqrt;
  s.decay_factor = row + kDecayFactor;
  s.weight_decay = static_cast<float>(groups_[gi].weight_decay);
  s.beta2 = static_cast<float>(kBeta2);
  s.one_minus_beta2 = static_cast<float>(1 - kBeta2);
  s.eps = static_cast<float>(kAdamEps);
  return s;
}
#else
bool Optimizer::prepare_group(size_t) { return false; }
bool Optimizer::apply_group(size_t) { return false; }
#endif

}  // namespace lucid::optim
