#include "lucid/model/depthwise.h"

#include <ATen/autocast_mode.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lucid/util/error.h"

#ifdef LUCID_CUDA_KERNELS
#include "lucid/model/depthwise_cuda.h"
#endif

namespace lucid::model {

namespace {

// On by default: a new input shape then costs about 2.5 s instead of 6.6 s, which more than pays
// for the kernels' slower steady step in the screens and the scale workload (docs/performance.md);
// LUCID_DEPTHWISE_KERNELS=0 keeps cuDNN's.
constexpr bool kKernelsByDefault = true;

std::atomic<bool>& kernels_on() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("LUCID_DEPTHWISE_KERNELS");
    if (v == nullptr || *v == '\0') return kKernelsByDefault;
    const std::string s(v);
    if (s != "0" && s != "1") throw UserError("LUCID_DEPTHWISE_KERNELS=" + s + ": expected 1 (on) or 0 (off)");
    return s == "1";
  }();
  return on;
}

#ifdef LUCID_CUDA_KERNELS
struct DepthwiseFunction : torch::autograd::Function<DepthwiseFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w) {
    ctx->save_for_backward({x, w});
    return cuda::depthwise_conv(x, w, false);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto gy = grads[0].contiguous(at::MemoryFormat::ChannelsLast);
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) gx = cuda::depthwise_conv(gy, w, true);
    if (ctx->needs_input_grad(1)) gw = cuda::depthwise_weight_grad(x, gy, w.size(2));
    return {gx, gw};
  }
};
#endif

}  // namespace

void set_depthwise_kernels(bool on) { kernels_on() = on; }
bool depthwise_kernels_on() { return kernels_on(); }

bool takes_depthwise_kernel(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  if (!kernels_on()) return false;  // read first in every build, so that a bad value is always reported
#ifdef LUCID_CUDA_KERNELS
  const auto& o = conv.options;
  const int64_t k = (*o.kernel_size())[0];
  const auto* pad = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  return x.is_cuda() && x.dim() == 4 && o.groups() == o.in_channels() && o.in_channels() == o.out_channels() &&
         (*o.kernel_size())[1] == k && k % 2 == 1 && (*o.stride())[0] == 1 && (*o.stride())[1] == 1 &&
         (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 && pad && (**pad)[0] == k / 2 && (**pad)[1] == k / 2 &&
         !o.bias() && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()) &&
         cuda::depthwise_available(x, k);
#else
  (void)conv;
  (void)x;
  return false;
#endif
}

torch::Tensor depthwise_forward(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
#ifdef LUCID_CUDA_KERNELS
  // As autocast casts a convolution's operands: to its lower-precision type when it is on.
  auto dtype =
      at::autocast::is_autocast_enabled(at::kCUDA) ? at::autocast::get_autocast_dtype(at::kCUDA) : x.scalar_type();
  auto input = x.to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
  auto weight = conv.weight.to(dtype).contiguous();
  return DepthwiseFunction::apply(input, weight);
#else
  (void)x;
  throw std::logic_error("depthwise kernels are not built into " + conv.name());
#endif
}

}  // namespace lucid::model
