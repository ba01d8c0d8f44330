// The optimizer's per-parameter arithmetic for SGD, MuSGD, AdamW and Adam as multi-tensor CUDA
// kernels (ATen's multi_tensor_apply: one launch per few dozen tensors instead of several kernels per
// tensor, which at about 440 tensors was the step's largest count of kernels). Each element follows
// the per-tensor ops of optim::Optimizer in FP32, rounded where ATen's kernels round (its addcmul is
// a fused multiply-add), from the same device table of scalars. Built with the other kernels
// (LUCID_CUDA_KERNELS).
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace lucid::optim::cuda {

using TensorLists = std::vector<std::vector<at::Tensor>>;

// A group's scalars: pointers into the optimizer's device table (read when the kernel runs, so a
// recorded launch reads each step's values), and its weight decay (fixed for the optimizer's life).
struct GroupScalars {
  const float* momentum = nullptr;            // SGD momentum, Muon's; the Adam family's beta1
  const float* one_minus_momentum = nullptr;  // 1 - momentum
  const float* neg_lr = nullptr;              // -(lr * sgd_scale)
  const float* neg_muon_lr = nullptr;         // -(lr * muon_scale)
  const float* neg_step_size = nullptr;       // Adam: -(lr / (1 - beta1^t))
  const float* bias2_sqrt = nullptr;          // Adam: sqrt(1 - beta2^t)
  const float* decay_factor = nullptr;        // AdamW: 1 - lr * weight_decay
  float weight_decay = 0;
  float beta2 = 0.999f, one_minus_beta2 = 1e-3f, eps = 1e-8f;  // each rounded from double, as a Scalar
};

// Each function launches its kernels and returns true, or returns false and launches nothing where
// the tensors do not suit them: every list's i-th tensor must be CUDA FP32, dense, of the first
// list's size, its elements in the same order in memory.

// SGD with Nesterov (and MuSGD's groups without Muon): lists grad, param, buf, update;
// d = grad + wd * param, buf = momentum * buf + d, update = d + momentum * buf.
bool sgd_prepare(TensorLists lists, const GroupScalars& s);
// param += neg_lr * update; lists param, update.
bool sgd_apply(TensorLists lists, const GroupScalars& s);
// Muon's momentum: lists grad, buf, update; buf = momentum * buf + (1 - momentum) * grad,
// update = momentum * buf + (1 - momentum) * grad (orthogonalised after).
bool muon_prepare(TensorLists lists, const GroupScalars& s);
// The Muon step, then its SGD step on the moved parameter: lists param, grad, update, buf_sgd.
bool muon_apply(TensorLists lists, const GroupScalars& s);
// AdamW (decoupled decay) or Adam (L2 decay on the gradient), moments and parameter in one pass:
// lists param, grad, exp_avg, exp_avg_sq.
bool adam_step(TensorLists lists, const GroupScalars& s, bool decoupled);

}  // namespace lucid::optim::cuda
