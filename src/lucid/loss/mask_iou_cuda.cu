#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>

#include "lucid/loss/mask_iou_cuda.h"
#include "lucid/loss/mask_logits.cuh"
#include "lucid/loss/mask_loss_cuda.h"

namespace lucid::loss::cuda {

namespace {

constexpr int kPairThreads = 128;  // threads per (GT slot, candidate) pair

struct Dims {
  int64_t anchors, gts, k, nm, h, w;
};

template <int NM>
__global__ void candidate_mask_iou_kernel(const float* coefs, const float* proto, const bool* gt_masks,
                                          const int64_t* gt_area, const int64_t* top, const float* boxes,
                                          const bool* valid, float scale, float* out, Dims d) {
  const int64_t pair = blockIdx.x, slot = pair / d.k, b = slot / d.gts;
  __shared__ float c[NM];
  __shared__ float crop[4];
  __shared__ int scratch[2][kPairThreads / 32];
  if (!valid[slot]) {
    if (threadIdx.x == 0) out[pair] = 0.f;
    return;
  }
  const int64_t a = b * d.anchors + top[pair];
  for (int k = threadIdx.x; k < NM; k += blockDim.x) c[k] = k < d.nm ? coefs[a * d.nm + k] : 0.f;
  if (threadIdx.x < 4) crop[threadIdx.x] = boxes[a * 4 + threadIdx.x] * scale;  // as the ATen form's FP32 product
  __syncthreads();
  const Window win = window_of(crop, static_cast<int>(d.w), static_cast<int>(d.h));
  const int64_t hw = d.h * d.w;
  const float* pb = proto + b * d.nm * hw;
  const bool* gt = gt_masks + slot * hw;
  const int bw = win.x1 - win.x0, n = bw * (win.y1 - win.y0);
  int pred = 0, inter = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t p = window_pixel(win, bw, d.w, i);
    if (logit<NM>(c, pb, hw, d.nm, p) > 0.f) {
      ++pred;
      inter += gt[p] ? 1 : 0;
    }
  }
  pred = block_sum(pred, scratch[0]);
  inter = block_sum(inter, scratch[1]);
  if (threadIdx.x == 0) {
    const int64_t uni = gt_area[slot] + pred - inter;
    out[pair] = __fdiv_rn(static_cast<float>(inter), static_cast<float>(uni > 1 ? uni : 1));
  }
}

}  // namespace

bool candidate_mask_ious_available(const Tensor& coefs, const Tensor& proto, const Tensor& pd_bboxes) {
  for (const auto* t : {&coefs, &proto, &pd_bboxes})
    if (!t->is_cuda() || t->scalar_type() != at::kFloat) return false;
  return coefs.dim() == 3 && coefs.size(2) <= kMaxCoefficients;
}

Tensor candidate_mask_ious(const Tensor& coefs, const Tensor& proto, const Tensor& gt_masks, const Tensor& gt_area,
                           const Tensor& top, const Tensor& pd_bboxes, float scale, const Tensor& valid) {
  auto fp32 = [](const Tensor& t) { return t.scalar_type() == at::kFloat && t.is_contiguous() && t.is_cuda(); };
  if (!fp32(coefs) || !fp32(proto) || !fp32(pd_bboxes) || gt_masks.scalar_type() != at::kBool ||
      !gt_masks.is_contiguous() || gt_area.scalar_type() != at::kLong || !gt_area.is_contiguous() ||
      top.scalar_type() != at::kLong || !top.is_contiguous() || valid.scalar_type() != at::kBool ||
      !valid.is_contiguous() || coefs.size(2) > kMaxCoefficients)
    throw std::invalid_argument("candidate mask IoU kernel: unsupported input types or layouts");
  const c10::cuda::CUDAGuard guard(coefs.device());
  auto out = at::empty(top.sizes(), coefs.options());
  const Dims d{coefs.size(1), top.size(1), top.size(2), coefs.size(2), proto.size(2), proto.size(3)};
  const int64_t pairs = top.numel();
  if (pairs == 0) return out;
  auto stream = at::cuda::getCurrentCUDAStream();
  const auto blocks = static_cast<unsigned>(pairs);
  if (d.nm <= 32)
    candidate_mask_iou_kernel<32><<<blocks, kPairThreads, 0, stream>>>(
        coefs.data_ptr<float>(), proto.data_ptr<float>(), gt_masks.data_ptr<bool>(), gt_area.data_ptr<int64_t>(),
        top.data_ptr<int64_t>(), pd_bboxes.data_ptr<float>(), valid.data_ptr<bool>(), scale, out.data_ptr<float>(), d);
  else
    candidate_mask_iou_kernel<kMaxCoefficients><<<blocks, kPairThreads, 0, stream>>>(
        coefs.data_ptr<float>(), proto.data_ptr<float>(), gt_masks.data_ptr<bool>(), gt_area.data_ptr<int64_t>(),
        top.data_ptr<int64_t>(), pd_bboxes.data_ptr<float>(), valid.data_ptr<bool>(), scale, out.data_ptr<float>(), d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace lucid::loss::cuda
