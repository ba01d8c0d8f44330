#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <limits>
#include <stdexcept>

#include "lucid/loss/top_candidates_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kThreads = 256;  // one block per slot; one thread per radix digit
constexpr int kRadixBits = 8;
constexpr int kDigits = 1 << kRadixBits;
static_assert(kDigits == kThreads, "the digit scan gives each thread one digit");

// ATen's radix order of FP32 values (TopKTypeConfig<float>::convert): unsigned keys that order as
// the values, a NaN above everything.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t x = __float_as_uint(v);
  const uint32_t flip = (x & 0x80000000u) ? 0xffffffffu : 0x80000000u;
  return v == v ? (x ^ flip) : 0xffffffffu;
}

using DigitScan = cub::BlockScan<uint32_t, kThreads>;
using PairScan = cub::BlockScan<uint64_t, kThreads>;  // (above << 32) | equal

struct KthKey {
  uint32_t key;   // the k-th largest key
  uint32_t need;  // how many of its equals the set takes
};

// A slot's row of the metric.
struct MetricRow {
  const float* metric;
  __device__ float operator()(int64_t i) const { return metric[i]; }
};

// A slot's row of the metric times its assignment mask, as ATen's product with a 1 / 0 mask: the
// metric where the anchor's GT is this slot, +-0 (or NaN) elsewhere.
struct AssignedRow {
  const float* metric;
  const int64_t* gts;  // the image's (A) assigned slots
  int64_t slot;        // within the image
  __device__ float operator()(int64_t i) const { return __fmul_rn(metric[i], gts[i] == slot ? 1.f : 0.f); }
};

// Radix select, most significant digit first: each pass counts the keys that share the digits found
// so far by their next digit, and picks the digit holding the k-th largest.
template <typename Row>
__device__ KthKey kth_largest(const Row& row, int64_t a, uint32_t k, uint32_t* hist, DigitScan::TempStorage& scan,
                              KthKey* found) {
  const int t = threadIdx.x, lane = t & 31;
  KthKey kth{0u, k};
  uint32_t known = 0u;  // the bits of the key found so far
  for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
    hist[t] = 0u;
    __syncthreads();
    for (int64_t base = 0; base < a; base += kThreads) {  // the same trips for every thread
      const int64_t i = base + t;
      const uint32_t key = i < a ? order_key(row(i)) : 0u;
      const bool counts = i < a && (key & known) == kth.key;
      const unsigned counting = __ballot_sync(0xffffffffu, counts);
      if (counts) {
        // One shared atomic per distinct digit of the warp: padding values share one digit.
        const uint32_t digit = (key >> shift) & (kDigits - 1);
        const unsigned peers = __match_any_sync(counting, digit);
        if (lane == __ffs(peers) - 1) atomicAdd(hist + digit, static_cast<uint32_t>(__popc(peers)));
      }
    }
    __syncthreads();
    // Thread t holds digit kDigits - 1 - t: the inclusive sum counts the keys at that digit or above.
    const uint32_t digit = kDigits - 1 - t, here = hist[digit];
    uint32_t at_or_above = 0u;
    DigitScan(scan).InclusiveSum(here, at_or_above);
    const uint32_t above = at_or_above - here;
    if (above < kth.need && kth.need <= at_or_above) *found = KthKey{kth.key | (digit << shift), kth.need - above};
    __syncthreads();
    kth = *found;
    known |= static_cast<uint32_t>(kDigits - 1) << shift;
    __syncthreads();
  }
  return kth;
}

__global__ void top_candidates_kernel(const float* metric, const bool* valid, int64_t a, int64_t k, int64_t* out) {
  const int64_t slot = blockIdx.x;
  int64_t* dst = out + slot * k;
  if (!valid[slot]) {
    for (int64_t j = threadIdx.x; j < k; j += kThreads) dst[j] = j;
    return;
  }
  __shared__ uint32_t hist[kDigits];
  __shared__ KthKey found;
  __shared__ union {
    DigitScan::TempStorage digits;
    PairScan::TempStorage pairs;
  } scan;
  const MetricRow row{metric + slot * a};
  const KthKey kth = kth_largest(row, a, static_cast<uint32_t>(k), hist, scan.digits, &found);
  // Every key above the k-th goes first, in index order; then its first `need` equals.
  const uint64_t above_total = static_cast<uint64_t>(k) - kth.need;
  uint64_t above_seen = 0, equal_seen = 0;
  for (int64_t base = 0; base < a && (above_seen < above_total || equal_seen < kth.need); base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const uint32_t key = i < a ? order_key(row(i)) : 0u;
    const bool above = i < a && key > kth.key, equal = i < a && key == kth.key;
    const uint64_t flags = (static_cast<uint64_t>(above) << 32) | static_cast<uint64_t>(equal);
    uint64_t before = 0, total = 0;
    PairScan(scan.pairs).ExclusiveSum(flags, before, total);
    if (above) dst[above_seen + (before >> 32)] = i;
    const uint64_t rank = equal_seen + (before & 0xffffffffu);
    if (equal && rank < kth.need) dst[above_total + rank] = i;
    above_seen += total >> 32;
    equal_seen += total & 0xffffffffu;
    __syncthreads();  // the scan's storage is used again
  }
}

// The second selection of an assigner with topk2 < topk: each slot keeps the anchors assigned to it
// that are in the top-k set of its metric times its assignment mask (ATen's set, over the whole
// row); the others become unassigned (-1). A slot without anchors has nothing to drop.
__global__ void keep_top_assigned_kernel(const float* metric, const int64_t* gts, int64_t slots, int64_t a, int64_t k,
                                         int64_t* out) {
  const int64_t slot = blockIdx.x, b = slot / slots;
  const AssignedRow row{metric + slot * a, gts + b * a, slot - b * slots};
  int assigned = 0;
  for (int64_t base = 0; base < a; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    assigned += __syncthreads_count(i < a && row.gts[i] == row.slot);
  }
  if (assigned == 0) return;
  __shared__ uint32_t hist[kDigits];
  __shared__ KthKey found;
  __shared__ DigitScan::TempStorage scan;
  const KthKey kth = kth_largest(row, a, static_cast<uint32_t>(k), hist, scan, &found);
  uint32_t equal_seen = 0;  // equals of the k-th key before this chunk, in index order
  for (int64_t base = 0; base < a; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const uint32_t key = i < a ? order_key(row(i)) : 0u;
    const bool equal = i < a && key == kth.key;
    uint32_t before = 0, total = 0;
    DigitScan(scan).ExclusiveSum(equal ? 1u : 0u, before, total);
    const bool in_set = key > kth.key || (equal && equal_seen + before < kth.need);
    if (i < a && row.gts[i] == row.slot && !in_set) out[b * a + i] = -1;
    equal_seen += total;
    __syncthreads();  // the scan's storage is used again
  }
}

}  // namespace

bool top_candidates_available(const Tensor& metric) {
  return metric.is_cuda() && metric.scalar_type() == at::kFloat && metric.dim() == 3 &&
         metric.size(2) <= std::numeric_limits<int32_t>::max();
}

Tensor top_candidates(const Tensor& metric, int64_t k, const Tensor& valid) {
  if (!top_candidates_available(metric) || !metric.is_contiguous() || !valid.is_cuda() ||
      valid.scalar_type() != at::kBool || !valid.is_contiguous() || valid.numel() != metric.size(0) * metric.size(1))
    throw std::invalid_argument("top-k candidate kernel: unsupported input types or layouts");
  const int64_t a = metric.size(2);
  if (k < 0 || k > a) throw std::invalid_argument("top-k candidate kernel: k must be in [0, anchors]");
  const c10::cuda::CUDAGuard guard(metric.device());
  auto out = at::empty({metric.size(0), metric.size(1), k}, metric.options().dtype(at::kLong));
  const int64_t slots = metric.size(0) * metric.size(1);
  if (slots == 0 || k == 0) return out;
  top_candidates_kernel<<<static_cast<unsigned>(slots), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      metric.data_ptr<float>(), valid.data_ptr<bool>(), a, k, out.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

Tensor keep_top_assigned(const Tensor& metric, const Tensor& gts, int64_t k) {
  if (!top_candidates_available(metric) || !metric.is_contiguous() || !gts.is_cuda() ||
      gts.scalar_type() != at::kLong || !gts.is_contiguous() || gts.dim() != 2 || gts.size(0) != metric.size(0) ||
      gts.size(1) != metric.size(2))
    throw std::invalid_argument("top-k assignment kernel: unsupported input types or layouts");
  const int64_t a = metric.size(2);
  if (k <= 0 || k > a) throw std::invalid_argument("top-k assignment kernel: k must be in [1, anchors]");
  const c10::cuda::CUDAGuard guard(metric.device());
  auto out = gts.clone();
  const int64_t slots = metric.size(0) * metric.size(1);
  if (slots == 0 || a == 0) return out;
  keep_top_assigned_kernel<<<static_cast<unsigned>(slots), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      metric.data_ptr<float>(), gts.data_ptr<int64_t>(), metric.size(1), a, k, out.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::loss::cuda
