// The assigner's candidate mask IoUs on CUDA: the fused kernel (loss/mask_iou_cuda.h) against the
// ATen form (TaskAlignedAssigner::mask_ious) on the same inputs, with boxes inside, clipped,
// fractional, empty and not a number, padding slots, and coefficient counts on both sides of the
// 32-coefficient specialisation. Where the logits are far from zero the two agree exactly; with
// random prototypes a logit's sign may differ by rounding, so there nearly every IoU is equal and
// none far off. Two runs give the same bytes, the per-slot form gives the per-pair form's bytes, and
// the assigner's CUDA path runs the kernel.
#include <gtest/gtest.h>

#include "lucid/loss/assigner.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/mask_iou_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

struct Inputs {
  loss::MaskQuality mq;
  Tensor top, boxes, valid, gt_area;
};

// B images, A anchors, M GT slots, K candidates per slot, nm coefficients, an h x w prototype map
// for 4h x 4w input pixels. separated: logits kept at least 0.5 away from zero.
Inputs make(int64_t B, int64_t A, int64_t M, int64_t K, int64_t nm, int64_t h, int64_t w, bool separated,
            uint64_t seed) {
  torch::manual_seed(seed);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  Inputs in;
  in.mq.scale = 0.25f;
  if (separated) {
    // One prototype plane of +-1 and coefficients of one sign: every logit is +-|c0|.
    in.mq.proto = torch::zeros({B, nm, h, w}, f);
    in.mq.proto.select(1, 0).copy_(torch::randint(0, 2, {B, h, w}, f) * 2 - 1);
    in.mq.coefs = torch::zeros({B, A, nm}, f);
    in.mq.coefs.select(2, 0).copy_((torch::rand({B, A}, f) + 0.5) * (torch::randint(0, 2, {B, A}, f) * 2 - 1));
  } else {
    in.mq.proto = torch::randn({B, nm, h, w}, f);
    in.mq.coefs = torch::randn({B, A, nm}, f);
  }
  in.mq.gt_masks = torch::rand({B, M, h, w}, f) > 0.6;
  // Box corners from -0.3 to 1.3 of the input: inside, clipped, fractional, empty (x2 <= x1).
  auto x = torch::rand({B, A, 2}, f) * 1.6 - 0.3, y = torch::rand({B, A, 2}, f) * 1.6 - 0.3;
  in.boxes =
      torch::stack(
          {x.select(2, 0) * (4 * w), y.select(2, 0) * (4 * h), x.select(2, 1) * (4 * w), y.select(2, 1) * (4 * h)}, 2)
          .contiguous();
  in.boxes[0][1][0] = std::numeric_limits<float>::quiet_NaN();  // a box that is not a number: empty
  in.top = std::get<1>(torch::rand({B, M, A}, f).topk(K, -1));
  in.valid = torch::rand({B, M}, f) > 0.3;
  in.valid[0][0] = true;
  in.gt_area = in.mq.gt_masks.flatten(2).sum(-1);
  return in;
}

#ifdef LUCID_CUDA_KERNELS
Tensor kernel(const Inputs& in, loss::cuda::MaskIouForm form = loss::cuda::MaskIouForm::kPerSlot) {
  return loss::cuda::candidate_mask_ious(in.mq.coefs, in.mq.proto, in.mq.gt_masks, in.gt_area, in.top, in.boxes,
                                         in.mq.scale, in.valid, form);
}

Tensor aten(const Inputs& in) {
  return torch::where(in.valid.unsqueeze(-1), loss::TaskAlignedAssigner::mask_ious(in.mq, in.top, in.boxes),
                      torch::zeros({}, in.boxes.options()));
}
#endif

}  // namespace

TEST(MaskIouGpu, KernelMatchesTheAtenForm) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  for (int64_t nm : {32, 40}) {
    const auto sep = make(2, 300, 6, 10, nm, 40, 48, true, 1);
    ASSERT_TRUE(loss::cuda::candidate_mask_ious_available(sep.mq.coefs, sep.mq.proto, sep.boxes));
    auto a = kernel(sep), b = aten(sep);
    EXPECT_TRUE(torch::equal(a, b)) << "nm " << nm << ": separated logits, max difference "
                                    << (a - b).abs().max().item<float>();
    EXPECT_GT(a.gt(0).sum().item<int64_t>(), 10) << "nm " << nm << ": too few overlapping pairs to compare";
    EXPECT_TRUE(torch::equal(a.masked_select(~sep.valid.unsqueeze(-1).expand_as(a)),
                             torch::zeros({}, a.options()).expand({(~sep.valid).sum().item<int64_t>() * 10})));

    const auto rnd = make(2, 300, 6, 10, nm, 40, 48, false, 2);
    auto c = kernel(rnd), d = aten(rnd);
    const auto equal = c.eq(d).to(torch::kDouble).mean().item<double>();
    EXPECT_GT(equal, 0.99) << "nm " << nm << ": share of IoUs equal to the ATen form's";
    EXPECT_LT((c - d).abs().max().item<float>(), 0.02f) << "nm " << nm;
    EXPECT_TRUE(torch::equal(c, kernel(rnd))) << "nm " << nm << ": two runs differ";
  }
#endif
}

TEST(MaskIouGpu, PerSlotFormGivesThePerPairFormsBytes) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  // Random prototypes put many logits near zero, where another summation order would flip signs:
  // the two forms must agree on every bit. 30 and 21 candidates are YOLO26's two assigners; 70 is
  // above the per-slot form's bound, where it runs the per-pair form. A 160 x 160 map is a 640-pixel
  // input's; 41 x 37 has rows that the slot's four blocks share unevenly.
  struct Shape {
    int64_t B, A, M, K, nm, h, w;
  };
  for (const Shape& sh : {Shape{2, 400, 6, 30, 32, 160, 160}, Shape{3, 300, 9, 21, 32, 41, 37},
                          Shape{2, 300, 5, 30, 40, 40, 48}, Shape{1, 300, 4, 70, 32, 40, 48}}) {
    const auto in = make(sh.B, sh.A, sh.M, sh.K, sh.nm, sh.h, sh.w, false, 4 + static_cast<uint64_t>(sh.K));
    const auto slot = kernel(in, loss::cuda::MaskIouForm::kPerSlot);
    const auto pair = kernel(in, loss::cuda::MaskIouForm::kPerPair);
    const std::string what = c10::str("K ", sh.K, ", nm ", sh.nm, ", ", sh.h, " x ", sh.w);
    EXPECT_TRUE(torch::equal(slot, pair)) << what << ": " << slot.ne(pair).sum().item<int64_t>() << " IoUs differ";
    EXPECT_GT(slot.gt(0).sum().item<int64_t>(), 10) << what << ": too few overlapping pairs to compare";
    EXPECT_TRUE(torch::equal(slot, kernel(in))) << what << ": two runs differ";
  }
#endif
}

TEST(MaskIouGpu, TheAssignerDispatchesToTheKernel) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  // device_mask_ious, the assigner's CUDA path, runs the kernel on these FP32 inputs: padding slots
  // come back as 0, as the ATen form's after the assigner's masking.
  const auto in = make(2, 300, 6, 10, 32, 40, 48, true, 3);
  auto via = loss::TaskAlignedAssigner::device_mask_ious(in.mq, in.top, in.boxes, in.valid);
  EXPECT_TRUE(torch::equal(via, kernel(in)));
  EXPECT_TRUE(torch::equal(via, aten(in)));
#endif
}
