#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/cuda/MultiTensorApply.cuh>

#include "lucid/optim/multi_tensor_cuda.h"

namespace lucid::optim::cuda {

namespace {

// The elements of one block's chunk of one tensor, each list's pointer at that chunk; Op::load reads
// the group's scalars once per thread, Op's call updates element i. Explicit _rn arithmetic rounds
// where the per-tensor ATen kernels round, so each element gets their bytes.
template <int depth, typename Op>
struct ChunkUpdate {
  __device__ __forceinline__ void operator()(int chunk_size, at::native::TensorListMetadata<depth>& tl, Op op) {
    const int t = tl.block_to_tensor[blockIdx.x];
    const int64_t offset = static_cast<int64_t>(tl.block_to_chunk[blockIdx.x]) * chunk_size;
    const int64_t n = min(tl.numel_for_tensor[t] - offset, static_cast<int64_t>(chunk_size));
    float* p[depth];
#pragma unroll
    for (int d = 0; d < depth; ++d) p[d] = static_cast<float*>(const_cast<void*>(tl.addresses[d][t])) + offset;
    const auto s = op.load();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) op(s, p, i);
  }
};

struct Loaded {
  float m, omm, neg_lr, neg_muon_lr, neg_step, bias2_sqrt, decay;
};

__device__ __forceinline__ float read(const float* p) { return p ? *p : 0.f; }

struct ScalarsOp {
  GroupScalars s;
  __device__ __forceinline__ Loaded load() const {
    return {read(s.momentum),      read(s.one_minus_momentum), read(s.neg_lr),      read(s.neg_muon_lr),
            read(s.neg_step_size), read(s.bias2_sqrt),         read(s.decay_factor)};
  }
  // torch::add(grad, param, wd), ATen's a + alpha * b: the gradient with L2 decay.
  __device__ __forceinline__ float decayed(float grad, float param) const {
    return s.weight_decay != 0.f ? __fmaf_rn(s.weight_decay, param, grad) : grad;
  }
};

// ATen's addcmul with value 1 is fma(tensor1, tensor2, self); mul_ and add_ are kernels of their own,
// each rounded.
struct SgdPrepare : ScalarsOp {  // grad, param, buf, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float d = decayed(p[0][i], p[1][i]);
    const float buf = __fadd_rn(__fmul_rn(p[2][i], v.m), d);  // buf.mul_(m).add_(d)
    p[2][i] = buf;
    p[3][i] = __fmaf_rn(buf, v.m, d);  // addcmul(d, buf, m)
  }
};

struct SgdApply : ScalarsOp {  // param, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    p[0][i] = __fmaf_rn(p[1][i], v.neg_lr, p[0][i]);  // param.addcmul_(update, neg_lr)
  }
};

struct MuonPrepare : ScalarsOp {  // grad, buf, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float grad = p[0][i];
    const float buf = __fmaf_rn(grad, v.omm, __fmul_rn(p[1][i], v.m));  // buf.mul_(m).addcmul_(grad, omm)
    p[1][i] = buf;
    p[2][i] = __fmaf_rn(grad, v.omm, __fmul_rn(buf, v.m));  // addcmul(buf * m, grad, omm)
  }
};

struct MuonApply : ScalarsOp {  // param, grad, update, buf_sgd
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float moved = __fmaf_rn(p[2][i], v.neg_muon_lr, p[0][i]);  // param.addcmul_(update, neg_muon_lr)
    const float d = decayed(p[1][i], moved);
    const float buf = __fadd_rn(__fmul_rn(p[3][i], v.m), d);  // buf_sgd.mul_(m).add_(d)
    p[3][i] = buf;
    p[0][i] = __fmaf_rn(__fmaf_rn(buf, v.m, d), v.neg_lr, moved);  // param.addcmul_(addcmul(d, buf, m), neg_lr)
  }
};

template <bool decoupled>
struct AdamStep : ScalarsOp {  // param, grad, exp_avg, exp_avg_sq
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    float param = p[0][i];
    const float d = decoupled ? p[1][i] : decayed(p[1][i], param);
    // exp_avg.lerp_(d, 1 - beta1): ATen's self + weight * (end - self) for a weight below one half.
    const float avg = p[2][i];
    const float exp_avg = __fmaf_rn(v.omm, __fsub_rn(d, avg), avg);
    // exp_avg_sq.mul_(beta2).addcmul_(d, d, 1 - beta2): a value other than 1 is fma(value, t1 * t2, self).
    const float exp_avg_sq = __fmaf_rn(s.one_minus_beta2, __fmul_rn(d, d), __fmul_rn(p[3][i], s.beta2));
    p[2][i] = exp_avg;
    p[3][i] = exp_avg_sq;
    if (decoupled && s.weight_decay != 0.f) param = __fmul_rn(param, v.decay);
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(exp_avg_sq), v.bias2_sqrt), s.eps);
    // addcdiv with value 1: self + t1 / t2.
    p[0][i] = __fadd_rn(param, __fdiv_rn(__fmul_rn(exp_avg, v.neg_step), denom));
  }
};

// Every list's i-th tensor CUDA FP32, dense, of the first list's size, its elements in the same order in
// memory.
bool multi_tensor_available(const TensorLists& lists) {
  if (lists.empty()) return false;
  for (size_t i = 0; i < lists[0].size(); ++i) {
    const auto& first = lists[0][i];
    if (!first.is_cuda() || first.scalar_type() != at::kFloat || !first.is_non_overlapping_and_dense()) return false;
    for (const auto& list : lists) {
      const auto& t = list[i];
      if (t.scalar_type() != at::kFloat || t.device() != first.device() || t.sizes() != first.sizes() ||
          !t.is_non_overlapping_and_dense())
        return false;
      // The same element order in memory: strides equal wherever the size is above 1 (a gradient may
      // differ from its channels-last parameter in the stride of a size-1 dimension).
      for (int64_t d = 0; d < t.dim(); ++d)
        if (t.size(d) > 1 && t.stride(d) != first.stride(d)) return false;
    }
  }
  return true;
}

// Launches op over the lists, or returns false (nothing launched) where the tensors do not suit.
template <int depth, typename Op>
bool launch(TensorLists& lists, const Op& op) {
  static_assert(depth >= 1 && depth <= 5);
  if (static_cast<int>(lists.size()) != depth || !multi_tensor_available(lists)) return false;
  if (!lists[0].empty()) at::native::multi_tensor_apply<depth>(lists, ChunkUpdate<depth, Op>(), op);
  return true;
}

}  // namespace

bool sgd_prepare(TensorLists lists, const GroupScalars& s) { return launch<4>(lists, SgdPrepare{{s}}); }
bool sgd_apply(TensorLists lists, const GroupScalars& s) { return launch<2>(lists, SgdApply{{s}}); }
bool muon_prepare(TensorLists lists, const GroupScalars& s) { return launch<3>(lists, MuonPrepare{{s}}); }
bool muon_apply(TensorLists lists, const GroupScalars& s) { return launch<4>(lists, MuonApply{{s}}); }

bool adam_step(TensorLists lists, const GroupScalars& s, bool decoupled) {
  return decoupled ? launch<4>(lists, AdamStep<true>{{s}}) : launch<4>(lists, AdamStep<false>{{s}});
}

}  // namespace lucid::optim::cuda
