// The loss normalises its terms over the batch: by its foreground anchors, its target-score sum and
// its batch size. In data-parallel training a rank holds only part of the global batch; these
// normalisers are then summed over the ranks (one small all-reduce per loss branch), so each rank's
// loss is its exact share of the global batch's loss and the shares' gradients sum to the single
// process's (dist/gradient_sync.h). Process-wide, like the world it reduces over.
#pragma once
#include <torch/torch.h>

#include <functional>

namespace lucid::loss {

// Sums a small tensor over the ranks, in place (empty: one process, nothing to sum).
using BatchReduction = std::function<void(torch::Tensor& t)>;
void set_batch_reduction(BatchReduction reduce);
const BatchReduction& batch_reduction();

}  // namespace lucid::loss
