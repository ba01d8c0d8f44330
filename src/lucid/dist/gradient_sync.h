// The gradient all-reduce of data-parallel training: the trainable parameters in buckets of about
// 25 MiB (in reverse order, as backward produces their gradients, as the reference's DDP buckets
// them). Each rank's loss is its share of the global batch's loss (the loss normalises over every
// rank's targets, loss/batch_reduction.h), so the sum over ranks is the gradient a single process
// would compute on the global batch; the reference's DDP, averaging losses scaled by the world
// size, sums the same way.
//
// overlap: a post-accumulate hook on every parameter launches a bucket's all-reduce as soon as
// backward has accumulated all of its gradients on the step's final micro-step, in bucket order
// on every rank, so communication runs under the rest of the backward. Without it (recorded
// steps: the hooks would only run while recording) reduce() runs every bucket at the update, on
// persistent buffers, so a recording of the update holds the all-reduce.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "lucid/dist/process_group.h"

namespace lucid::dist {

class GradientSync {
 public:
  GradientSync(World& world, const std::vector<torch::Tensor>& params, bool overlap,
               int64_t bucket_bytes = int64_t{25} << 20);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before each micro-step's backward: whether an optimizer step follows it (only then the hooks reduce).
  void set_final_micro_step(bool final) { armed_ = final; }
  // Before clipping: every bucket reduced into the parameters' .grad (waits for those in flight).
  void reduce();

  struct Bucket;
  void gradient_ready(size_t bucket);  // from the hooks

 private:
  void launch_ready();
  void launch(Bucket& b);
  void finish(Bucket& b);

  World& world_;
  bool overlap_;
  bool armed_ = false;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  size_t next_launch_ = 0;
};

// Rank 0's parameters and buffers into every rank's (the start of a fit, as DDP's constructor).
void broadcast_module(World& world, torch::nn::Module& module);

}  // namespace lucid::dist
