#include "lucid/dist/gradient_sync.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <optional>

namespace lucid::dist {

struct GradientSync::Bucket {
  std::vector<torch::Tensor> params;
  torch::Tensor flat;  // persistent: the all-reduce runs in place on it
  size_t ready = 0;
  bool launched = false;
  std::optional<PendingReduce> pending;
};

namespace {

class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(GradientSync* sync, size_t bucket) : sync_(sync), bucket_(bucket) {}
  void operator()(const torch::autograd::Variable&) override { sync_->gradient_ready(bucket_); }

 private:
  GradientSync* sync_;
  size_t bucket_;
};

}  // namespace

GradientSync::GradientSync(World& world, const std::vector<torch::Tensor>& params, bool overlap, int64_t bucket_bytes)
    : world_(world), overlap_(overlap) {
  std::unique_ptr<Bucket> current;
  int64_t bytes = 0;
  auto close = [&] {
    if (!current) return;
    int64_t numel = 0;
    for (const auto& p : current->params) numel += p.numel();
    current->flat = torch::zeros({numel}, current->params.front().options().requires_grad(false));
    buckets_.push_back(std::move(current));
    bytes = 0;
  };
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->requires_grad()) continue;
    if (it->scalar_type() != params.front().scalar_type())
      throw std::invalid_argument("GradientSync: parameters of one dtype expected");
    if (!current) current = std::make_unique<Bucket>();
    current->params.push_back(*it);
    bytes += it->numel() * static_cast<int64_t>(it->element_size());
    if (bytes >= bucket_bytes) close();
  }
  close();
  if (overlap_)
    for (size_t b = 0; b < buckets_.size(); ++b)
      for (const auto& p : buckets_[b]->params)
        torch::autograd::impl::set_post_acc_grad_hooks(p, std::make_unique<ReadyHook>(this, b));
}

GradientSync::~GradientSync() {
  if (overlap_)
    for (auto& b : buckets_)
      for (const auto& p : b->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void GradientSync::gradient_ready(size_t bucket) {
  if (!armed_) return;
  auto& b = *buckets_[bucket];
  if (++b.ready == b.params.size()) launch_ready();
}

// Buckets are launched in their order on every rank (collectives match by order), as soon as all
// buckets before them have been.
void GradientSync::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->ready == buckets_[next_launch_]->params.size())
    launch(*buckets_[next_launch_++]);
}

void GradientSync::launch(Bucket& b) {
  int64_t offset = 0;
  for (const auto& p : b.params) {
    auto slot = b.flat.narrow(0, offset, p.numel());
    if (p.grad().defined())
      slot.view(p.sizes()).copy_(p.grad());
    else
      slot.zero_();  // no gradient on any rank (the same graph everywhere): stays undefined
    offset += p.numel();
  }
  b.pending.emplace(world_.all_reduce_sum_async({b.flat}));
  b.launched = true;
}

void GradientSync::finish(Bucket& b) {
  b.pending->wait();
  b.pending.reset();
  int64_t offset = 0;
  for (const auto& p : b.params) {
    if (p.grad().defined()) p.mutable_grad().copy_(b.flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
  b.ready = 0;
  b.launched = false;
}

void GradientSync::reduce() {
  torch::NoGradGuard no_grad;
  for (size_t k = next_launch_; k < buckets_.size(); ++k) launch(*buckets_[k]);
  for (auto& b : buckets_) finish(*b);
  next_launch_ = 0;
  armed_ = false;
}

void broadcast_module(World& world, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;
  for (const auto& p : module.parameters()) tensors.push_back(p);
  for (const auto& b : module.buffers()) tensors.push_back(b);
  // One collective per dtype group would be faster; a fit does this once.
  for (auto& t : tensors) {
    auto c = t.contiguous();
    world.broadcast({c});
    if (!c.is_same(t)) t.copy_(c);
  }
}

}  // namespace lucid::dist
