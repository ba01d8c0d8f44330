#include "lucid/loss/mask_loss.h"

#include <stdexcept>

#include "lucid/util/device.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/mask_loss_cuda.h"
#endif

namespace lucid::loss {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Slots [start, start + k) of every image: logits and targets (B, k, Hm, Wm), and the crop window as
// separate column (B, k, 1, Wm) and row (B, k, Hm, 1) factors.
struct Chunk {
  Tensor logits, target, cols, rows;
};

Chunk chunk_at(const Tensor& coefs, const Tensor& proto_flat, const Tensor& masks, bool overlap, const Tensor& gt_index,
               const Tensor& crop, int64_t start, int64_t k, int64_t mh, int64_t mw) {
  const int64_t bs = coefs.size(0);
  Chunk c;
  c.logits = torch::bmm(coefs.narrow(1, start, k), proto_flat).view({bs, k, mh, mw});
  auto idx = gt_index.narrow(1, start, k);
  if (overlap) {
    c.target = (masks.unsqueeze(1) == (idx + 1).view({bs, k, 1, 1})).to(torch::kFloat);
  } else {
    const int64_t m = masks.size(1);
    auto flat = (idx + torch::arange(bs, idx.options()).unsqueeze(1) * m).reshape({-1});
    c.target = masks.reshape({bs * m, mh, mw}).index_select(0, flat).view({bs, k, mh, mw}).to(torch::kFloat);
  }
  auto b = crop.narrow(1, start, k).unsqueeze(-1).unsqueeze(-1).unbind(2);  // 4 x (B, k, 1, 1)
  auto cols = torch::arange(mw, crop.options()).view({1, 1, 1, mw});
  auto rows = torch::arange(mh, crop.options()).view({1, 1, mh, 1});
  c.cols = ((cols >= b[0]) & (cols < b[2])).to(torch::kFloat);
  c.rows = ((rows >= b[1]) & (rows < b[3])).to(torch::kFloat);
  return c;
}

int64_t slots_per_chunk(int64_t bs, int64_t slots, int64_t pixels, int64_t chunk_elements) {
  return std::clamp<int64_t>(chunk_elements / std::max<int64_t>(bs * pixels, 1), 1, std::max<int64_t>(slots, 1));
}

class CroppedMaskBce : public torch::autograd::Function<CroppedMaskBce> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& coefs, const Tensor& proto, const Tensor& masks,
                        const Tensor& gt_index, const Tensor& crop, const Tensor& area, const Tensor& valid,
                        bool overlap, int64_t chunk_elements, bool fused) {
    ctx->save_for_backward({coefs, proto, masks, gt_index, crop, area, valid});
    ctx->saved_data["overlap"] = overlap;
    ctx->saved_data["chunk"] = chunk_elements;
    ctx->saved_data["fused"] = fused;
#ifdef LUCID_CUDA_KERNELS
    if (fused) return cuda::cropped_mask_bce_forward(coefs, proto, masks, overlap, gt_index, crop, area, valid);
#endif
    const int64_t bs = coefs.size(0), slots = coefs.size(1), mh = proto.size(2), mw = proto.size(3);
    auto proto_flat = proto.reshape({bs, proto.size(1), mh * mw});
    const int64_t step = slots_per_chunk(bs, slots, mh * mw, chunk_elements);
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < slots; s += step) {
      const int64_t k = std::min(step, slots - s);
      auto c = chunk_at(coefs, proto_flat, masks, overlap, gt_index, crop, s, k, mh, mw);
      // The reference's order: BCE, crop (columns, then rows), mean over the map, / area.
      auto bce = torch::nn::functional::binary_cross_entropy_with_logits(
          c.logits, c.target, torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
      bce.mul_(c.cols).mul_(c.rows);
      parts.push_back(bce.mean({2, 3}) / area.narrow(1, s, k));
    }
    auto out = parts.empty() ? torch::zeros({bs, 0}, coefs.options()) : torch::cat(parts, 1);
    return torch::where(valid, out, torch::zeros({}, out.options()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // FP32 whatever autocast the caller's backward runs under (the in-place products need one dtype).
    util::Autocast off(false);
    auto saved = ctx->get_saved_variables();
    const auto &coefs = saved[0], &proto = saved[1], &masks = saved[2], &gt_index = saved[3], &crop = saved[4],
               &area = saved[5], &valid = saved[6];
    const bool overlap = ctx->saved_data["overlap"].toBool();
    const int64_t chunk_elements = ctx->saved_data["chunk"].toInt();
    const int64_t bs = coefs.size(0), slots = coefs.size(1), nm = proto.size(1), mh = proto.size(2), mw = proto.size(3);
    const bool want_proto = ctx->needs_input_grad(1);
#ifdef LUCID_CUDA_KERNELS
    if (ctx->saved_data["fused"].toBool()) {
      auto [gc, gp] = cuda::cropped_mask_bce_backward(grad_outputs[0], coefs, proto, masks, overlap, gt_index, crop,
                                                      area, valid, want_proto);
      return {gc, gp, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    }
#endif
    auto proto_flat = proto.reshape({bs, nm, mh * mw});
    // d term / d logit = g / area / (Hm * Wm) * inside * (sigmoid(logit) - target); 0 on padding.
    auto g = torch::where(valid, grad_outputs[0], torch::zeros({}, grad_outputs[0].options())) / area /
             static_cast<double>(mh * mw);
    std::vector<Tensor> grad_coefs;
    Tensor grad_proto = want_proto ? torch::zeros_like(proto_flat) : Tensor();
    const int64_t step = slots_per_chunk(bs, slots, mh * mw, chunk_elements);
    for (int64_t s = 0; s < slots; s += step) {
      const int64_t k = std::min(step, slots - s);
      auto c = chunk_at(coefs, proto_flat, masks, overlap, gt_index, crop, s, k, mh, mw);
      auto dl = c.logits.sigmoid_().sub_(c.target).mul_(c.cols * g.narrow(1, s, k).view({bs, k, 1, 1})).mul_(c.rows);
      dl = dl.view({bs, k, mh * mw});
      grad_coefs.push_back(torch::bmm(dl, proto_flat.transpose(1, 2)));
      if (want_proto) grad_proto.baddbmm_(coefs.narrow(1, s, k).transpose(1, 2), dl);
    }
    auto gc = grad_coefs.empty() ? torch::zeros_like(coefs) : torch::cat(grad_coefs, 1);
    return {gc,       want_proto ? grad_proto.view_as(proto) : Tensor(),
            Tensor(), Tensor(),
            Tensor(), Tensor(),
            Tensor(), Tensor(),
            Tensor(), Tensor()};
  }
};

}  // namespace

bool fused_mask_bce_available(const Tensor& coefs, const Tensor& proto) {
#ifdef LUCID_CUDA_KERNELS
  return cuda::available(coefs, proto);
#else
  return false;
#endif
}

Tensor cropped_mask_bce(const Tensor& coefs, const Tensor& proto, const Tensor& masks, bool overlap,
                        const Tensor& gt_index, const Tensor& crop, const Tensor& area, const Tensor& valid,
                        int64_t chunk_elements, MaskBceForm form) {
  if (coefs.dim() != 3 || proto.dim() != 4 || coefs.size(0) != proto.size(0) || coefs.size(2) != proto.size(1))
    throw std::invalid_argument("cropped_mask_bce: coefficients (B, K, nm) and prototypes (B, nm, Hm, Wm) disagree");
  const int64_t expected_dims = overlap ? 3 : 4;
  if (masks.dim() != expected_dims || masks.size(-2) != proto.size(2) || masks.size(-1) != proto.size(3))
    throw std::invalid_argument("cropped_mask_bce: masks do not match the prototypes' size");
  const bool fused = form == MaskBceForm::Fastest && fused_mask_bce_available(coefs, proto);
  if (!fused)
    return CroppedMaskBce::apply(coefs, proto, masks, gt_index, crop, area, valid, overlap, chunk_elements, false);
  // The kernels read FP32 contiguous inputs; gradients flow back through the conversions.
  auto f = [](const Tensor& t) { return t.to(torch::kFloat).contiguous(); };
  return CroppedMaskBce::apply(f(coefs), f(proto), masks.contiguous(), gt_index.to(torch::kLong).contiguous(), f(crop),
                               f(area), valid.to(torch::kBool).contiguous(), overlap, chunk_elements, true);
}

}  // namespace lucid::loss
