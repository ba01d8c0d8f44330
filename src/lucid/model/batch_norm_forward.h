// The training forward of every Conv's BatchNorm can be replaced process-wide: data-parallel
// training with sync_bn normalises over the statistics of every rank's part of the batch
// (dist/sync_batch_norm.h). Evaluation always runs the module's own forward.
#pragma once
#include <torch/torch.h>

#include <functional>

namespace lucid::model {

using BatchNormForward = std::function<torch::Tensor(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x)>;
// Empty: the module's own forward.
void set_batch_norm_forward(BatchNormForward forward);
const BatchNormForward& batch_norm_forward();

}  // namespace lucid::model
