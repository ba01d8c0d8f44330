#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>

#include "lucid/data/network_input_cuda.h"

namespace lucid::data::cuda {

namespace {

constexpr int kShift = 12;  // OpenCV's fixed-point HSV tables (hsv.cpp)
constexpr int kThreads = 256;

// OpenCV's sector table: which of t0..t3 feeds (b, g, r) in sectors 0..5.
__constant__ int kSector[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1}, {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};

__global__ void network_input_kernel(const uint8_t* images, const uint8_t* luts, float* out, int64_t plane, int width,
                                     int vec_width) {
  __shared__ int sdiv[256], hdiv[256];
  __shared__ uint8_t lut[768];
  const int64_t b = blockIdx.y;
  if (luts) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      // round(255 * 2^12 / v) and round(180 * 2^12 / (6 d)) in double, to nearest even as nearbyint
      sdiv[i] = i ? __double2int_rn(__ddiv_rn(double(255 << kShift), double(i))) : 0;
      hdiv[i] = i ? __double2int_rn(__ddiv_rn(double(180 << kShift), __dmul_rn(6.0, double(i)))) : 0;
    }
    for (int i = threadIdx.x; i < 768; i += blockDim.x) lut[i] = luts[b * 768 + i];
  }
  __syncthreads();
  const float inv255 = 1.0f / 255.0f;  // ATen's x / 255 on CUDA: x * (1 / 255) in FP32
  const uint8_t* in = images + b * 3 * plane;
  float* o = out + b * 3 * plane;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < plane; p += int64_t(gridDim.x) * blockDim.x) {
    int rgb[3] = {in[p], in[plane + p], in[2 * plane + p]};
    if (luts) {
      const int r = rgb[0], g = rgb[1], bl = rgb[2];
      const int v = max(max(r, g), bl), vmin = min(min(r, g), bl), diff = v - vmin;
      constexpr int half = 1 << (kShift - 1);
      const int s = (diff * sdiv[v] + half) >> kShift;
      int h = v == r ? g - bl : (v == g ? bl - r + 2 * diff : r - g + 4 * diff);
      h = (h * hdiv[diff] + half) >> kShift;
      if (h < 0) h += 180;
      const float hq = float(lut[h]);
      const float sq = __fmul_rn(float(lut[256 + s]), 1.0f / 255.0f);
      const float vq = __fmul_rn(float(lut[512 + v]), 1.0f / 255.0f);
      const float hh = __fmul_rn(hq, 6.0f / 180.0f);
      const float sector = truncf(hh), frac = __fsub_rn(hh, sector);
      const int sec = int(sector) % 6;
      const double sd = double(sq);
      float t[4];
      t[0] = vq;
      t[1] = __fmul_rn(vq, __fsub_rn(1.0f, sq));
      t[2] = __fmul_rn(vq, __double2float_rn(__dsub_rn(1.0, __dmul_rn(sd, double(frac)))));
      t[3] = __fmul_rn(vq, __double2float_rn(__dsub_rn(1.0, __dmul_rn(sd, double(__fsub_rn(1.0f, frac))))));
      const bool vec = (p % width) < vec_width;  // OpenCV's vector path truncates, its scalar tail rounds
      for (int c = 0; c < 3; ++c) {
        const float x = __fmul_rn(t[kSector[sec][2 - c]], 255.0f);
        const float q = vec ? truncf(x) : rintf(x);
        rgb[c] = int(fminf(fmaxf(q, 0.0f), 255.0f));
      }
    }
    for (int c = 0; c < 3; ++c) o[p * 3 + c] = __fmul_rn(float(rgb[c]), inv255);
  }
}

}  // namespace

at::Tensor network_input(const at::Tensor& images, const at::Tensor& luts, const at::Tensor& into) {
  if (!images.is_cuda() || images.scalar_type() != at::kByte || images.dim() != 4 || images.size(1) != 3 ||
      !images.is_contiguous())
    throw std::invalid_argument("network input kernel: images must be contiguous CUDA (B, 3, H, W) uint8");
  const int64_t B = images.size(0), H = images.size(2), W = images.size(3), plane = H * W;
  if (luts.defined() && (!luts.is_cuda() || luts.scalar_type() != at::kByte || luts.numel() != B * 768 ||
                         luts.device() != images.device()))
    throw std::invalid_argument("network input kernel: look-up tables must be (B, 3, 256) uint8 on the images' device");
  const c10::cuda::CUDAGuard guard(images.device());
  if (into.defined() && (into.sizes() != images.sizes() || into.scalar_type() != at::kFloat ||
                         into.device() != images.device() || !into.is_contiguous(at::MemoryFormat::ChannelsLast)))
    throw std::invalid_argument(
        "network input kernel: out must be (B, 3, H, W) FP32 channels-last on the images' device");
  auto out = into.defined()
                 ? into
                 : at::empty({B, 3, H, W}, images.options().dtype(at::kFloat), at::MemoryFormat::ChannelsLast);
  if (B == 0 || plane == 0) return out;
  const auto lut = luts.defined() ? luts.contiguous() : luts;
  const int64_t per_image = (plane + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(per_image, 1024)), static_cast<unsigned>(B));
  network_input_kernel<<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      images.data_ptr<uint8_t>(), lut.defined() ? lut.data_ptr<uint8_t>() : nullptr, out.data_ptr<float>(), plane,
      static_cast<int>(W), static_cast<int>((W / 32) * 32));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::data::cuda
