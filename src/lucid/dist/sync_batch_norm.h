// sync_bn: BatchNorm in training normalises over the statistics of the global batch (every rank's
// part), as the reference's SyncBatchNorm; the running statistics take the global mean and unbiased
// variance. The statistics' sums are all-reduced with a differentiable all-reduce (its backward
// all-reduces the gradient), so autograd gives every rank its share of the global gradient.
#pragma once
#include "lucid/dist/process_group.h"

namespace lucid::dist {

// Installs the replaced forward for every Conv's BatchNorm (model/batch_norm_forward.h); world may
// be null (one process: the same arithmetic, nothing to reduce).
void use_sync_batch_norm(World* world);

}  // namespace lucid::dist
