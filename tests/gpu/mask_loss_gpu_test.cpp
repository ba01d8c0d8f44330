// The fused mask-loss kernels against the chunked ATen form on the same CUDA inputs: slot terms and
// both gradients agree to rounding, for index-map (uint8 and int32) and per-GT masks, windows that
// are empty, fractional, partly or wholly outside the map, padding slots, and coefficient counts on
// both sides of the kernels' 32-coefficient specialisation; two runs give the same bytes. Slots of one
// GT window sharing a block give the bytes of a block per slot.
#include <gtest/gtest.h>

#include "lucid/loss/mask_loss.h"
#ifdef LUCID_CUDA_KERNELS
#include "lucid/loss/mask_loss_cuda.h"
#endif

using namespace lucid;
using torch::Tensor;

namespace {

struct Case {
  int64_t batch, slots, nm, h, w, gts;
  bool overlap;
  torch::ScalarType mask_type;
};

struct Inputs {
  Tensor coefs, proto, masks, gt_index, crop, area, valid;
};

Inputs make(const Case& c, uint64_t seed) {
  torch::manual_seed(seed);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  Inputs in;
  in.coefs = torch::randn({c.batch, c.slots, c.nm}, f);
  in.proto = torch::randn({c.batch, c.nm, c.h, c.w}, f);
  if (c.overlap)
    in.masks = torch::randint(0, c.gts + 1, {c.batch, c.h, c.w}, f.dtype(c.mask_type));
  else
    in.masks = torch::randint(0, 2, {c.batch, c.gts, c.h, c.w}, f.dtype(torch::kByte));
  in.gt_index = torch::randint(0, c.gts, {c.batch, c.slots}, f.dtype(torch::kLong));
  // Corners from -0.3 to 1.3 of the map: windows inside, clipped, fractional, empty (x2 <= x1).
  auto x = torch::rand({c.batch, c.slots, 2}, f) * 1.6 - 0.3;
  auto y = torch::rand({c.batch, c.slots, 2}, f) * 1.6 - 0.3;
  in.crop = torch::stack({x.select(2, 0) * c.w, y.select(2, 0) * c.h, x.select(2, 1) * c.w, y.select(2, 1) * c.h}, 2)
                .contiguous();
  in.area = torch::rand({c.batch, c.slots}, f) * 0.5 + 0.01;
  in.valid = torch::rand({c.batch, c.slots}, f) < 0.7;
  return in;
}

struct Result {
  Tensor out, grad_coefs, grad_proto;
};

Result run(const Inputs& in, bool overlap, loss::MaskBceForm form) {
  auto coefs = in.coefs.clone().requires_grad_(true), proto = in.proto.clone().requires_grad_(true);
  auto out = loss::cropped_mask_bce(coefs, proto, in.masks, overlap, in.gt_index, in.crop, in.area, in.valid,
                                    int64_t{1} << 16, form);
  // A weight per slot, so each slot's gradient is checked on its own scale.
  auto weight = torch::linspace(0.5, 1.5, out.numel(), out.options()).view_as(out);
  (out * weight).sum().backward();
  return {out.detach(), coefs.grad(), proto.grad()};
}

void expect_close(const Tensor& a, const Tensor& b, const char* what) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0)) << what << ": max |fused - aten| " << diff << " at scale " << scale;
}

}  // namespace

TEST(MaskLossGpu, FusedKernelsMatchTheAtenForm) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
  const std::vector<Case> cases = {
      {3, 40, 32, 40, 48, 5, true, torch::kByte},
      {2, 24, 32, 32, 32, 300, true, torch::kInt},
      {2, 30, 32, 24, 40, 6, false, torch::kByte},
      {2, 16, 40, 20, 28, 4, true, torch::kByte},  // more than 32 coefficients
      {1, 8, 7, 16, 16, 3, false, torch::kByte},   // fewer
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + ", slots " + std::to_string(c.slots) + ", nm " +
                 std::to_string(c.nm) + (c.overlap ? ", index map" : ", per-GT masks"));
    const auto in = make(c, seed++);
    ASSERT_TRUE(loss::fused_mask_bce_available(in.coefs, in.proto)) << "the fused kernels were not built";
    const auto fused = run(in, c.overlap, loss::MaskBceForm::Fastest);
    const auto aten = run(in, c.overlap, loss::MaskBceForm::Aten);
    expect_close(fused.out, aten.out, "slot terms");
    expect_close(fused.grad_coefs, aten.grad_coefs, "coefficient gradients");
    expect_close(fused.grad_proto, aten.grad_proto, "prototype gradients");
    EXPECT_EQ(fused.out.masked_select(~in.valid).abs().sum().item<float>(), 0.f) << "padding slots must give 0";
    const auto again = run(in, c.overlap, loss::MaskBceForm::Fastest);
    EXPECT_TRUE(torch::equal(fused.out, again.out) && torch::equal(fused.grad_coefs, again.grad_coefs) &&
                torch::equal(fused.grad_proto, again.grad_proto))
        << "two runs of the fused kernels differ";
  }
}

TEST(MaskLossGpu, SlotsOfOneWindowSharingBlocksGiveTheOneSlotBlocksBytes) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no usable CUDA device";
  }
#ifndef LUCID_CUDA_KERNELS
  GTEST_SKIP() << "built without the fused CUDA kernels";
#else
  // As the loss lays them out: each slot takes its GT's window and area, groups of 1 to 40 slots
  // (above the 16 a block takes), valid slots in any order, padding slots among them; plus a slot
  // with its GT's index but another window, which must not join the group.
  for (const Case& c :
       {Case{3, 120, 32, 160, 160, 8, true, torch::kByte}, Case{2, 90, 40, 40, 48, 5, false, torch::kByte}}) {
    auto in = make(c, 11);
    const auto f = in.crop.options();
    in.gt_index = torch::randint(0, c.gts, {c.batch, c.slots}, f.dtype(torch::kLong));
    in.gt_index.select(0, 0).narrow(0, 0, 40).fill_(1);  // one group of 40 in the first image
    const auto gt_crop = torch::rand({c.batch, c.gts, 4}, f) * torch::tensor({float(c.w), float(c.h)}, f).repeat({2});
    const auto boxes = torch::cat({gt_crop.narrow(2, 0, 2).minimum(gt_crop.narrow(2, 2, 2)),
                                   gt_crop.narrow(2, 0, 2).maximum(gt_crop.narrow(2, 2, 2))},
                                  2);
    const auto gt_area = torch::rand({c.batch, c.gts}, f) * 0.5 + 0.01;
    in.crop = boxes.gather(1, in.gt_index.unsqueeze(-1).expand({-1, -1, 4})).contiguous();
    in.area = gt_area.gather(1, in.gt_index).contiguous();
    in.crop[0][5][0] += 1.0f;  // the GT's index, another window
    in.valid = torch::rand({c.batch, c.slots}, f) < 0.8;
    const auto masks = in.masks.contiguous();
    SCOPED_TRACE(c10::str("slots ", c.slots, ", nm ", c.nm, ", ", c.h, " x ", c.w));
    const auto grouped =
        loss::cuda::cropped_mask_bce_forward(in.coefs, in.proto, masks, c.overlap, in.gt_index, in.crop, in.area,
                                             in.valid, loss::cuda::SlotGrouping::kByWindow);
    const auto single = loss::cuda::cropped_mask_bce_forward(in.coefs, in.proto, masks, c.overlap, in.gt_index, in.crop,
                                                             in.area, in.valid, loss::cuda::SlotGrouping::kNone);
    EXPECT_TRUE(torch::equal(grouped, single)) << grouped.ne(single).sum().item<int64_t>() << " slot terms differ";
    EXPECT_GT(grouped.ne(0).sum().item<int64_t>(), c.slots) << "too few slot terms to compare";
    const auto grad_out = torch::linspace(0.5, 1.5, grouped.numel(), grouped.options()).view_as(grouped);
    const auto [gc, gp] =
        loss::cuda::cropped_mask_bce_backward(grad_out, in.coefs, in.proto, masks, c.overlap, in.gt_index, in.crop,
                                              in.area, in.valid, true, loss::cuda::SlotGrouping::kByWindow);
    const auto [sc, sp] =
        loss::cuda::cropped_mask_bce_backward(grad_out, in.coefs, in.proto, masks, c.overlap, in.gt_index, in.crop,
                                              in.area, in.valid, true, loss::cuda::SlotGrouping::kNone);
    EXPECT_TRUE(torch::equal(gc, sc)) << gc.ne(sc).sum().item<int64_t>() << " coefficient gradients differ";
    EXPECT_TRUE(torch::equal(gp, sp)) << "prototype gradients differ";
    EXPECT_TRUE(torch::equal(grouped, loss::cuda::cropped_mask_bce_forward(in.coefs, in.proto, masks, c.overlap,
                                                                           in.gt_index, in.crop, in.area, in.valid)))
        << "two runs differ";
  }
#endif
}
