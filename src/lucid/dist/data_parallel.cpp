#include "lucid/dist/data_parallel.h"

#include "lucid/dist/sync_batch_norm.h"
#include "lucid/loss/batch_reduction.h"
#include "lucid/model/batch_norm_forward.h"

namespace lucid::dist {

DataParallel::DataParallel(World& world, torch::nn::Module& model, bool sync_bn) : world_(world) {
  loss::set_batch_reduction([w = &world_](torch::Tensor& t) { w->all_reduce_sum({t}); });
  if (sync_bn) use_sync_batch_norm(&world_);
  broadcast_module(world_, model);
}

DataParallel::~DataParallel() {
  loss::set_batch_reduction({});
  model::set_batch_norm_forward({});
}

std::unique_ptr<GradientSync> DataParallel::gradient_sync(const std::vector<torch::Tensor>& params,
                                                          bool overlap) const {
  return std::make_unique<GradientSync>(world_, params, overlap);
}

void DataParallel::gather_gradients(const std::vector<torch::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  auto flat = torch::cat(flat_parts);
  world_.all_reduce_sum({flat});
  int64_t offset = 0;
  for (auto& g : grads) {
    if (world_.primary())
      g.copy_(flat.narrow(0, offset, g.numel()).view(g.sizes()));
    else
      g.zero_();
    offset += g.numel();
  }
}

void DataParallel::keep_primary_gradients(const std::vector<torch::Tensor>& params) const {
  if (world_.primary()) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().zero_();
}

std::shared_ptr<void> DataParallel::alone() const {
  auto saved = std::make_shared<loss::BatchReduction>(loss::batch_reduction());
  loss::set_batch_reduction({});
  return std::shared_ptr<void>(nullptr, [saved](void*) { loss::set_batch_reduction(*saved); });
}

torch::Tensor DataParallel::global_items(const torch::Tensor& items) const {
  auto sum = items.detach().clone();
  world_.all_reduce_sum({sum});
  return sum;
}

std::vector<double> DataParallel::from_primary(std::vector<double> values) const {
  auto t = torch::tensor(values, torch::TensorOptions().dtype(torch::kDouble)).to(world_.device());
  world_.broadcast({t});
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::string DataParallel::from_primary(const std::string& key, const std::string& text) const {
  return world_.share(key, text);
}

void DataParallel::share_buffers(torch::nn::Module& module) const {
  torch::NoGradGuard no_grad;
  for (auto& b : module.buffers()) {
    auto c = b.contiguous();
    world_.broadcast({c});
    if (!c.is_same(b)) b.copy_(c);
  }
}

}  // namespace lucid::dist
