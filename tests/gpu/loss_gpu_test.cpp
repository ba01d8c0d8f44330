// The loss on CUDA: BF16 predictions under BF16 autocast agree with the FP32 CPU loss of the same
// values, and one call synchronises with the host exactly once (the foreground-count read) when the
// targets come from the CPU.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "sync_counter.h"

#include <ATen/autocast_mode.h>

#include "lucid/loss/segmentation_loss.h"

using namespace lucid;
using torch::Tensor;

namespace {

using lucid::test_support::SyncCounter;

model::HeadOutputs random_outputs(int64_t bs, int64_t h, int64_t w, int64_t nc, int64_t reg_max, bool e2e) {
  int64_t na = 0;
  model::HeadOutputs out;
  for (int s : {8, 16, 32}) {
    out.feats.push_back(torch::zeros({bs, 1, h / s, w / s}));
    na += (h / s) * (w / s);
  }
  auto branch = [&] {
    model::BranchOutputs b;
    b.boxes = reg_max > 1 ? torch::randn({bs, 4 * reg_max, na}) : torch::rand({bs, 4, na}) * 3 + 0.5;
    b.scores = torch::randn({bs, nc, na});
    b.mask_coefficient = torch::randn({bs, 32, na});
    return b;
  };
  out.one2many = branch();
  out.one2many.proto = torch::randn({bs, 32, h / 4, w / 4});
  if (e2e) {
    out.one2many.semantic = torch::randn({bs, nc, h / 8, w / 8});
    out.one2one = branch();
  }
  return out;
}

// Leaves of the given dtype on the given device (one-to-one protos detached from one-to-many's).
model::HeadOutputs leaves(const model::HeadOutputs& p, torch::ScalarType t, torch::Device d) {
  auto c = [&](const Tensor& x) { return x.defined() ? x.detach().to(d, t).requires_grad_(true) : Tensor(); };
  model::HeadOutputs out;
  for (const auto& f : p.feats) out.feats.push_back(f.to(d, t));
  out.one2many = {c(p.one2many.boxes), c(p.one2many.scores), c(p.one2many.mask_coefficient), c(p.one2many.proto),
                  c(p.one2many.semantic)};
  if (p.one2one) {
    auto sem = out.one2many.semantic.defined() ? out.one2many.semantic.detach() : Tensor();
    out.one2one = model::BranchOutputs{c(p.one2one->boxes), c(p.one2one->scores), c(p.one2one->mask_coefficient),
                                       out.one2many.proto.detach(), sem};
  }
  return out;
}

loss::SegTargets crowded_targets(int64_t bs, int64_t h, int64_t w, bool overlap) {
  loss::SegTargets t;
  std::vector<float> idx, cls;
  std::vector<Tensor> boxes, inst;
  auto masks = torch::zeros({bs, h / 4, w / 4}, torch::kUInt8);
  for (int64_t b = 1; b < bs; ++b) {  // image 0 stays empty
    const int n = 12;
    auto xywh = torch::rand({n, 4}) * torch::tensor({0.6f, 0.6f, 0.4f, 0.4f}) + torch::tensor({0.2f, 0.2f, 0.02f, 0.02f});
    auto area = (xywh.select(1, 2) * xywh.select(1, 3));
    auto order = std::get<1>(area.sort(0, /*descending=*/true));
    xywh = xywh.index_select(0, order);
    for (int k = 0; k < n; ++k) {
      idx.push_back(static_cast<float>(b));
      cls.push_back(static_cast<float>(k % 3));
      boxes.push_back(xywh[k]);
      auto x1 = static_cast<int64_t>((xywh[k][0] - xywh[k][2] / 2).item<float>() * (w / 4));
      auto x2 = static_cast<int64_t>((xywh[k][0] + xywh[k][2] / 2).item<float>() * (w / 4)) + 1;
      auto y1 = static_cast<int64_t>((xywh[k][1] - xywh[k][3] / 2).item<float>() * (h / 4));
      auto y2 = static_cast<int64_t>((xywh[k][1] + xywh[k][3] / 2).item<float>() * (h / 4)) + 1;
      auto m = torch::zeros({h / 4, w / 4}, torch::kUInt8);
      m.slice(0, y1, y2).slice(1, x1, x2).fill_(1);
      inst.push_back(m);
      masks[b].masked_fill_(m.to(torch::kBool), k + 1);
    }
  }
  t.batch_idx = torch::tensor(idx);
  t.cls = torch::tensor(cls).view({-1, 1});
  t.bboxes = torch::stack(boxes);
  t.masks = overlap ? masks : torch::stack(inst);
  t.sem_masks = torch::zeros({bs, h / 4, w / 4}, torch::kUInt8);
  return t;
}

}  // namespace

TEST(LossGpu, Bf16AutocastMatchesCpuFp32AndSyncsOnce) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA);
  for (bool e2e : {true, false}) {
    for (bool overlap : {true, false}) {
      torch::manual_seed(0);
      loss::LossOptions o;
      o.nc = 3, o.reg_max = e2e ? 1 : 16, o.end2end = e2e, o.overlap_mask = overlap;
      auto raw = random_outputs(4, 160, 224, 3, o.reg_max, e2e);
      auto targets = crowded_targets(4, 160, 224, overlap);
      // CPU FP32 loss on the BF16-rounded values.
      auto bf16_cpu = leaves(raw, torch::kBFloat16, torch::kCPU);
      auto cpu = leaves(bf16_cpu, torch::kFloat, torch::kCPU);
      loss::SegmentationLoss criterion(o);
      auto expected = criterion(cpu, targets);

      auto gpu = leaves(bf16_cpu, torch::kBFloat16, cuda);
      criterion(gpu, targets);  // warm-up (allocator, pinned host blocks)
      torch::cuda::synchronize();
      SyncCounter counter;
      loss::LossResult got;
      {
        c10::WarningUtils::WarningHandlerGuard guard(&counter);
        c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
        at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
        at::autocast::set_autocast_enabled(at::kCUDA, true);
        got = criterion(gpu, targets);
        got.total.sum().backward();
        at::autocast::set_autocast_enabled(at::kCUDA, false);
        c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
      }
      at::autocast::clear_cache();
      EXPECT_EQ(counter.count, 1) << "e2e " << e2e << " overlap " << overlap;
      auto ours = got.total.detach().cpu(), ref = expected.total.detach();
      for (int k = 0; k < 5; ++k)
        EXPECT_NEAR(ours[k].item<double>(), ref[k].item<double>(), 1e-4 * std::abs(ref[k].item<double>()) + 1e-7)
            << "term " << k << " e2e " << e2e << " overlap " << overlap;
      EXPECT_TRUE(torch::equal(got.one2many.assignment.fg_mask.cpu(), expected.one2many.assignment.fg_mask));
      EXPECT_EQ(gpu.one2many.proto.grad().scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::isfinite(gpu.one2many.scores.grad()).all().item<bool>());
    }
  }
}
