#include "lucid/loss/class_bce.h"

#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/class_bce_cuda.h"
#endif

namespace lucid::loss {

namespace {

namespace F = torch::nn::functional;

Tensor aten_bce(const Tensor& logits, const Tensor& target) {
  return F::binary_cross_entropy_with_logits(logits, target,
                                             F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
}

#ifdef LUCID_CUDA_KERNELS
class FusedClassBce : public torch::autograd::Function<FusedClassBce> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& logits, const Tensor& target) {
    ctx->save_for_backward({logits, target});
    return cuda::class_bce_forward(logits, target);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {cuda::class_bce_backward(grads[0], saved[0], saved[1]), Tensor()};
  }
};
#endif

}  // namespace

Tensor class_bce(const Tensor& logits, const Tensor& target) {
#ifdef LUCID_CUDA_KERNELS
  if (cuda::class_bce_available(logits, target))
    return FusedClassBce::apply(logits.contiguous(), target.detach().contiguous());
#endif
  return aten_bce(logits, target);
}

}  // namespace lucid::loss
