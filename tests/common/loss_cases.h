// Inputs for the loss tests (CPU and GPU): random raw head outputs of a batch, and random instance
// targets with the given number of instances per image, in the reference dataloader's layout.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "lucid/loss/targets.h"
#include "lucid/model/heads.h"

namespace lucid::loss_cases {

using torch::Tensor;

// Raw head outputs for a batch of `bs` images of h x w pixels (strides 8, 16, 32), from the global
// generator. Plain tensors: the tests make their own leaves.
inline model::HeadOutputs random_outputs(int64_t bs, int64_t h, int64_t w, int64_t nc, int64_t reg_max, bool e2e) {
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

// Copies of `p` as fresh leaves of dtype `t` on `d` that require grad (the one-to-one branch shares
// the one-to-many prototypes and semantic map, detached, as the heads give them).
inline model::HeadOutputs leaves(const model::HeadOutputs& p, torch::ScalarType t, torch::Device d) {
  auto c = [&](const Tensor& x) { return x.defined() ? x.detach().to(d, t).clone().requires_grad_(true) : Tensor(); };
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

// counts[i] random boxes in image i (area-descending, as the reference's dataloader orders them),
// each with a rectangular mask at h/4 x w/4: an overlap index map per image (int32 when an image
// holds more than 255 instances, uint8 otherwise) or one mask per instance; classes cycle over nc.
inline loss::SegTargets random_targets(const std::vector<int64_t>& counts, int64_t h, int64_t w, int64_t nc,
                                       bool overlap) {
  const int64_t bs = static_cast<int64_t>(counts.size()), mh = h / 4, mw = w / 4;
  const bool wide = *std::max_element(counts.begin(), counts.end()) > 255;
  std::vector<float> idx, cls;
  std::vector<Tensor> boxes, inst;
  auto maps = torch::zeros({bs, mh, mw}, wide ? torch::kInt32 : torch::kUInt8);
  auto sem = torch::zeros({bs, mh, mw}, torch::kUInt8);
  for (int64_t b = 0; b < bs; ++b) {
    const int64_t n = counts[b];
    if (n == 0) continue;
    auto xywh =
        torch::rand({n, 4}) * torch::tensor({0.6f, 0.6f, 0.4f, 0.4f}) + torch::tensor({0.2f, 0.2f, 0.02f, 0.02f});
    auto order = std::get<1>((xywh.select(1, 2) * xywh.select(1, 3)).sort(0, /*descending=*/true));
    xywh = xywh.index_select(0, order);
    auto a = xywh.accessor<float, 2>();
    for (int64_t k = 0; k < n; ++k) {
      idx.push_back(static_cast<float>(b));
      cls.push_back(static_cast<float>(k % nc));
      boxes.push_back(xywh[k]);
      auto x1 = static_cast<int64_t>((a[k][0] - a[k][2] / 2) * mw),
           x2 = static_cast<int64_t>((a[k][0] + a[k][2] / 2) * mw) + 1;
      auto y1 = static_cast<int64_t>((a[k][1] - a[k][3] / 2) * mh),
           y2 = static_cast<int64_t>((a[k][1] + a[k][3] / 2) * mh) + 1;
      auto m = torch::zeros({mh, mw}, torch::kUInt8);
      m.slice(0, y1, y2).slice(1, x1, x2).fill_(1);
      inst.push_back(m);
      maps[b].masked_fill_(m.to(torch::kBool), k + 1);
      sem[b].masked_fill_(m.to(torch::kBool), k % nc);
    }
  }
  loss::SegTargets t;
  const auto n = static_cast<int64_t>(idx.size());
  t.batch_idx = torch::tensor(idx).view({n});
  t.cls = torch::tensor(cls).view({n, 1});
  t.bboxes = n ? torch::stack(boxes) : torch::zeros({0, 4});
  t.masks = overlap ? maps : (n ? torch::stack(inst) : torch::zeros({0, mh, mw}, torch::kUInt8));
  t.sem_masks = sem;
  return t;
}

}  // namespace lucid::loss_cases
