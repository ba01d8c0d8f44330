#include "lucid/loss/semantic_term.h"

#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/semantic_term_cuda.h"
#endif

namespace lucid::loss {

namespace {

#ifdef LUCID_CUDA_KERNELS
class FusedSemanticParts : public torch::autograd::Function<FusedSemanticParts> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& logits,
                                                const Tensor& target) {
    auto maps = cuda::semantic_forward(logits, target);
    ctx->save_for_backward({logits, target, maps.prob});
    return {maps.terms.mean(), maps.prob_target.sum({2, 3}), maps.prob.sum({2, 3})};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {cuda::semantic_backward(saved[0], saved[1], saved[2], grads[0], grads[1], grads[2]), Tensor()};
  }
};
#endif

}  // namespace

SemanticParts semantic_parts(const Tensor& logits, const Tensor& target) {
#ifdef LUCID_CUDA_KERNELS
  if (cuda::semantic_kernels_available(logits, target)) {
    auto out = FusedSemanticParts::apply(logits, target.detach());
    return {out[0], out[1], out[2]};
  }
#endif
  auto p = logits.sigmoid();
  return {torch::nn::functional::binary_cross_entropy_with_logits(logits, target), (p * target).sum({2, 3}),
          p.sum({2, 3})};
}

}  // namespace lucid::loss
