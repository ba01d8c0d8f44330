#include "lucid/dist/sync_batch_norm.h"

#include "lucid/model/batch_norm_forward.h"

namespace lucid::dist {

namespace {

// Sum over the ranks forward; the gradient of every rank's copy reaches every input, so backward
// sums the gradients over the ranks too.
class AllReduceSum : public torch::autograd::Function<AllReduceSum> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, World* world) {
    ctx->saved_data["world"] = reinterpret_cast<int64_t>(world);
    auto y = x.clone();
    world->all_reduce_sum({y});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* world = reinterpret_cast<World*>(ctx->saved_data["world"].toInt());
    auto g = grads[0].contiguous().clone();
    world->all_reduce_sum({g});
    return {g, torch::Tensor()};
  }
};

torch::Tensor global_sum(const torch::Tensor& x, World* world) {
  return world && world->size() > 1 ? AllReduceSum::apply(x, world) : x;
}

torch::Tensor sync_forward(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& input, World* world) {
  const auto& o = bn.options;
  // The statistics in FP64: a sum over the parts of the batch then equals the sum over the whole
  // batch to far below FP32 rounding, so the normalised values do not depend on the world.
  auto x = input.to(torch::kDouble);
  const int64_t c = x.size(1);
  auto count = torch::full({1}, static_cast<double>(x.numel() / c), x.options().requires_grad(false));
  auto sums = global_sum(torch::cat({x.sum({0, 2, 3}), count}), world);
  const auto n = sums.narrow(0, c, 1);
  auto mean = sums.narrow(0, 0, c) / n;
  auto centred = x - mean.view({1, c, 1, 1});
  auto var = global_sum(centred.square().sum({0, 2, 3}), world) / n;
  auto y = (centred * (var + o.eps()).rsqrt().view({1, c, 1, 1})).to(torch::kFloat);
  if (o.affine()) y = y * bn.weight.view({1, c, 1, 1}) + bn.bias.view({1, c, 1, 1});
  if (o.track_running_stats()) {
    torch::NoGradGuard no_grad;
    const double m = o.momentum().value_or(0.1);
    const auto unbiased = var.detach() * (n / (n - 1).clamp_min(1));
    bn.running_mean.mul_(1 - m).add_((mean.detach() * m).to(bn.running_mean.scalar_type()));
    bn.running_var.mul_(1 - m).add_((unbiased * m).to(bn.running_var.scalar_type()));
    bn.num_batches_tracked.add_(1);
  }
  return y.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

}  // namespace

void use_sync_batch_norm(World* world) {
  model::set_batch_norm_forward(
      [world](torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x) { return sync_forward(bn, x, world); });
}

}  // namespace lucid::dist
