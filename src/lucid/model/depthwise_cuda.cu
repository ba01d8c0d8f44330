#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <stdexcept>

#include "lucid/model/depthwise_cuda.h"
#include "lucid/model/depthwise_math.h"

namespace lucid::model::cuda {

namespace {

constexpr int kThreads = 256;

using depthwise::Shape;

// One strip of kStrip output columns of one channel per thread (depthwise::strip_at).
template <typename T, int K>
__global__ void depthwise_conv_kernel(const T* __restrict__ x, const T* __restrict__ wt, T* __restrict__ y, Shape s,
                                      bool flipped) {
  const int total = s.n * s.h * depthwise::strips_per_row(s) * s.c;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const depthwise::Strip item = depthwise::strip_at(i, s);
    depthwise::output_strip<T, K>(x, wt, y, s, flipped, item.n, item.h, item.col0, item.c);
  }
}

// First pass of the weight gradient: CUDA block p takes row block p, its threads the channels.
template <typename T, int K>
__global__ void depthwise_weight_partial_kernel(const T* __restrict__ x, const T* __restrict__ gy,
                                                float* __restrict__ partial, Shape s, int rows_per_block) {
  for (int c = threadIdx.x; c < s.c; c += blockDim.x)
    depthwise::weight_partial<T, K>(x, gy, partial, s, rows_per_block, blockIdx.x, c);
}

// Second pass: one warp per (channel, tap), its lanes' shares added as a shuffle tree
// (depthwise_math.h). Warps take whole outputs, so each warp leaves the loop together.
__global__ void depthwise_weight_sum_kernel(const float* __restrict__ partial, float* __restrict__ grad, int64_t blocks,
                                            int64_t per_block) {
  const int lane = threadIdx.x % depthwise::kLanes;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / depthwise::kLanes;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / depthwise::kLanes; i < per_block;
       i += warps) {
    float v = depthwise::lane_share(partial, blocks, per_block, i, lane);
    for (int offset = depthwise::kLanes / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) grad[i] = v;
  }
}

Shape shape_of(const Tensor& x) {
  return {static_cast<int>(x.size(0)), static_cast<int>(x.size(1)), static_cast<int>(x.size(2)),
          static_cast<int>(x.size(3))};
}

void check(const Tensor& x, const Tensor& other, const char* what) {
  if (!x.is_cuda() || x.dim() != 4 || !x.is_contiguous(at::MemoryFormat::ChannelsLast) ||
      x.numel() >= depthwise::kMaxDepthwiseElements || other.scalar_type() != x.scalar_type() ||
      other.device() != x.device())
    throw std::invalid_argument(std::string("depthwise kernel: ") + what +
                                " needs channels_last CUDA tensors of one dtype and device");
}

unsigned grid_for(int64_t total) {
  return static_cast<unsigned>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 65535L * 8));
}

template <typename Launch>
void with_kernel_size(int64_t k, Launch&& launch) {
  switch (k) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 3:
      return launch(std::integral_constant<int, 3>{});
    case 5:
      return launch(std::integral_constant<int, 5>{});
    case 7:
      return launch(std::integral_constant<int, 7>{});
    default:
      throw std::invalid_argument("depthwise kernel: kernel size " + std::to_string(k) + " not built");
  }
}

}  // namespace

bool depthwise_available(const Tensor& x, int64_t k) {
  const auto t = x.scalar_type();
  return x.is_cuda() && x.dim() == 4 && x.numel() < depthwise::kMaxDepthwiseElements &&
         (k == 1 || k == 3 || k == 5 || k == 7) && (t == at::kFloat || t == at::kHalf || t == at::kBFloat16);
}

Tensor depthwise_conv(const Tensor& x, const Tensor& w, bool flipped) {
  check(x, w, "the convolution");
  if (!w.is_contiguous() || w.dim() != 4 || w.size(0) != x.size(1) || w.size(1) != 1 || w.size(2) != w.size(3))
    throw std::invalid_argument("depthwise kernel: the weight must be a contiguous (C, 1, k, k) tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  if (x.numel() == 0) return y;
  const Shape s = shape_of(x);
  const int64_t strip_threads = x.numel() / s.w * depthwise::strips_per_row(s);
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "depthwise_conv", [&] {
    with_kernel_size(w.size(2), [&](auto k) {
      depthwise_conv_kernel<scalar_t, decltype(k)::value><<<grid_for(strip_threads), kThreads, 0, stream>>>(
          x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), s, flipped);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

Tensor depthwise_weight_grad(const Tensor& x, const Tensor& gy, int64_t k) {
  check(x, gy, "the weight gradient");
  if (gy.sizes() != x.sizes()) throw std::invalid_argument("depthwise kernel: gradient and input shapes differ");
  const c10::cuda::CUDAGuard guard(x.device());
  const Shape s = shape_of(x);
  const int64_t rows = int64_t{s.n} * s.h, per_block = s.c * k * k;
  const depthwise::RowBlocks split = depthwise::row_blocks(rows);
  const int64_t rows_per_block = split.rows_per_block, blocks = split.blocks;
  auto f32 = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
  // Every block writes all its partial sums; only an empty input leaves them to the zeros.
  auto partial = rows > 0 ? at::empty({blocks, per_block}, f32) : at::zeros({blocks, per_block}, f32);
  auto grad = at::empty({s.c, 1, k, k}, f32);
  auto stream = at::cuda::getCurrentCUDAStream();
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (s.c + 31) / 32 * 32));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "depthwise_weight_grad", [&] {
    with_kernel_size(k, [&](auto kk) {
      if (rows > 0)
        depthwise_weight_partial_kernel<scalar_t, decltype(kk)::value>
            <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(),
                                                                    partial.data_ptr<float>(), s,
                                                                    static_cast<int>(rows_per_block));
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  depthwise_weight_sum_kernel<<<grid_for(per_block * depthwise::kLanes), kThreads, 0, stream>>>(
      partial.data_ptr<float>(), grad.data_ptr<float>(), blocks, per_block);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad.to(x.scalar_type());
}

}  // namespace lucid::model::cuda
