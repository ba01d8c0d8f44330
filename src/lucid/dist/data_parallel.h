// What a fit does differently as one rank of a data-parallel world: the loss normalisers summed
// over the ranks, sync_bn, the same starting weights on every rank, the gradient all-reduce, the
// global batch's loss items, rank 0's validation and run folder shared with every rank, and the
// buffers kept equal. Trainer::fit() calls these at its few seams; everything else is the single
// process's code.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "lucid/dist/gradient_sync.h"
#include "lucid/dist/process_group.h"

namespace lucid::dist {

class DataParallel {
 public:
  // Installs the loss's batch reduction and (sync_bn) the synchronised BatchNorm, and broadcasts
  // rank 0's parameters and buffers of `model`.
  DataParallel(World& world, torch::nn::Module& model, bool sync_bn);
  ~DataParallel();  // uninstalls them
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  World& world() const { return world_; }
  // The gradient all-reduce of a fit over `params` (overlap: during backward, see gradient_sync.h).
  std::unique_ptr<GradientSync> gradient_sync(const std::vector<torch::Tensor>& params, bool overlap) const;
  // The global batch's loss items: the sum of the ranks' shares.
  torch::Tensor global_items(const torch::Tensor& items) const;
  // Rank 0's values on every rank (validation results, the run folder).
  std::vector<double> from_primary(std::vector<double> values) const;
  std::string from_primary(const std::string& key, const std::string& text) const;
  // At a checkpoint: gradients accumulated since the last optimizer step (a partial accumulation)
  // summed over the ranks into rank 0's and zeroed elsewhere, so the checkpoint holds the global
  // batch's partial sum and a resume (rank 0 restoring it, the others zeroing theirs,
  // keep_primary_gradients) continues exactly.
  void gather_gradients(const std::vector<torch::Tensor>& params) const;
  void keep_primary_gradients(const std::vector<torch::Tensor>& params) const;
  // While the returned guard lives, the loss reduces over this rank's batch only (rank 0's
  // validation, which the other ranks do not join).
  std::shared_ptr<void> alone() const;
  // Rank 0's buffers (BatchNorm statistics, which each rank gathers from its own part of the batch
  // without sync_bn) into every rank's modules, so the ranks hold the same model and EMA.
  void share_buffers(torch::nn::Module& module) const;

 private:
  World& world_;
};

}  // namespace lucid::dist
