#include "lucid/data/network_input.h"

#include "lucid/data/hsv.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/data/network_input_cuda.h"
#endif

namespace lucid::data {

torch::Tensor network_input_ops(const torch::Tensor& images, const torch::Tensor& gains) {
  auto x = gains.defined() ? hsv_augment(images, gains) : images;
  x = x.to(torch::kFloat).div_(255.0);
  if (x.is_cuda()) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  return x;
}

torch::Tensor network_input(const torch::Tensor& images, const torch::Tensor& gains, const torch::Tensor& out) {
#ifdef LUCID_CUDA_KERNELS
  if (images.is_cuda() && images.dim() == 4 && images.size(1) == 3 && images.scalar_type() == torch::kUInt8) {
    torch::Tensor luts;
    if (gains.defined()) {
      if (gains.dim() != 2 || gains.size(0) != images.size(0) || gains.size(1) != 3)
        throw std::invalid_argument("network_input: gains must be (B, 3)");
      luts = hsv_tables(gains).pin_memory().to(images.device(), /*non_blocking=*/true);
    }
    return cuda::network_input(images.contiguous(), luts, out);
  }
#endif
  auto x = network_input_ops(images, gains);
  if (!out.defined()) return x;
  if (out.sizes() != x.sizes() || out.strides() != x.strides() || out.scalar_type() != x.scalar_type())
    throw std::invalid_argument("network_input: out must have the result's shape, layout and type");
  return out.copy_(x);
}

}  // namespace lucid::data
