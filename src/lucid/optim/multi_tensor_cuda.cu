#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/cuda/MultiTensorApply.cuh>

#include "lucid/optim/multi_tensor_cuda.h"

namespace lucid::optim::cuda {

namespace {

// The elements of one block's chunk of one tensor, each list's pointer at that chunk; Op::load reads
// the group's scalars once per thread, Op's call updates element i. Explicit _rn arithmetic keeps
// the per-tensor ops' separate roundings where they are separate kernels.
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
  // torch::add(grad, param, wd): the gradient with L2 decay.
  __device__ __forceinline__ float decayed(float grad, float param) const {
    return s.weight_decay != 0.f ? __fadd_rn(grad, __fmul_rn(s.weight_decay, param)) : grad;
  }
};

struct SgdPrepare : ScalarsOp {  // grad, param, buf, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float d = decayed(p[0][i], p[1][i]);
    const float buf = __fadd_rn(__fmul_rn(p[2][i], v.m), d);
    p[2][i] = buf;
    p[3][i] = __fadd_rn(d, __fmul_rn(buf, v.m));
  }
};

struct SgdApply : ScalarsOp {  // param, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    p[0][i] = __fadd_rn(p[0][i], __fmul_rn(p[1][i], v.neg_lr));
  }
};

struct MuonPrepare : ScalarsOp {  // grad, buf, update
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float g = __fmul_rn(p[0][i], v.omm);
    const float buf = __fadd_rn(__fmul_rn(p[1][i], v.m), g);
    p[1][i] = buf;
    p[2][i] = __fadd_rn(__fmul_rn(buf, v.m), g);
  }
};

struct MuonApply : ScalarsOp {  // param, grad, update, buf_sgd
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    const float moved = __fadd_rn(p[0][i], __fmul_rn(p[2][i], v.neg_muon_lr));
    const float d = decayed(p[1][i], moved);
    const float buf = __fadd_rn(__fmul_rn(p[3][i], v.m), d);
    p[3][i] = buf;
    p[0][i] = __fadd_rn(moved, __fmul_rn(__fadd_rn(d, __fmul_rn(buf, v.m)), v.neg_lr));
  }
};

template <bool decoupled>
struct AdamStep : ScalarsOp {  // param, grad, exp_avg, exp_avg_sq
  __device__ __forceinline__ void operator()(const Loaded& v, float* const* p, int64_t i) const {
    float param = p[0][i];
    const float d = decoupled ? p[1][i] : decayed(p[1][i], param);
    // lerp(exp_avg, d, 1 - beta1), as ATen's for a weight below one half.
    const float avg = p[2][i];
    const float exp_avg = __fadd_rn(avg, __fmul_rn(v.omm, __fsub_rn(d, avg)));
    const float exp_avg_sq = __fadd_rn(__fmul_rn(p[3][i], s.beta2), __fmul_rn(s.one_minus_beta2, __fmul_rn(d, d)));
    p[2][i] = exp_avg;
    p[3][i] = exp_avg_sq;
    if (decoupled && s.weight_decay != 0.f) param = __fmul_rn(param, v.decay);
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(exp_avg_sq), v.bias2_sqrt), s.eps);
    p[0][i] = __fadd_rn(param, __fdiv_rn(__fmul_rn(exp_avg, v.neg_step), denom));
  }
};

template <int depth, typename Op>
void launch(TensorLists& lists, const Op& op) {
  if (lists.empty() || lists[0].empty()) return;
  TORCH_CHECK(lists.size() == depth && multi_tensor_available(lists),
              "optimizer: tensors the multi-tensor kernels cannot take");
  at::native::multi_tensor_apply<depth>(lists, ChunkUpdate<depth, Op>(), op);
}

}  // namespace

bool multi_tensor_available(const TensorLists& lists) {
  if (lists.empty()) return false;
  for (size_t i = 0; i < lists[0].size(); ++i) {
    const auto& first = lists[0][i];
    if (!first.is_cuda() || first.scalar_type() != at::kFloat || !first.is_non_overlapping_and_dense()) return false;
    for (const auto& list : lists) {
      const auto& t = list[i];
      if (t.scalar_type() != at::kFloat || t.device() != first.device() || t.sizes() != first.sizes() ||
          t.strides() != first.strides())
        return false;
    }
  }
  return true;
}

void sgd_prepare(TensorLists lists, const GroupScalars& s) { launch<4>(lists, SgdPrepare{{s}}); }
void sgd_apply(TensorLists lists, const GroupScalars& s) { launch<2>(lists, SgdApply{{s}}); }
void muon_prepare(TensorLists lists, const GroupScalars& s) { launch<3>(lists, MuonPrepare{{s}}); }
void muon_apply(TensorLists lists, const GroupScalars& s) { launch<4>(lists, MuonApply{{s}}); }

void adam_step(TensorLists lists, const GroupScalars& s, bool decoupled) {
  if (decoupled)
    launch<4>(lists, AdamStep<true>{{s}});
  else
    launch<4>(lists, AdamStep<false>{{s}});
}

}  // namespace lucid::optim::cuda
