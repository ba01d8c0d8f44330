#include "lucid/loss/targets.h"

#include "lucid/loss/boxes.h"
#include "lucid/util/error.h"

namespace lucid::loss {

Tensor upload(const Tensor& t, const torch::Device& device) {
  if (!t.defined() || t.device() == device) return t;
  if (t.is_cpu() && device.is_cuda()) return t.pin_memory().to(device, /*non_blocking=*/true);
  return t.to(device);
}

PaddedTargets pad_targets(const SegTargets& targets, int64_t batch_size, double height, double width,
                          const torch::Device& device) {
  const int64_t n = targets.size();
  auto fopts = torch::TensorOptions().dtype(torch::kFloat);
  PaddedTargets out;
  out.counts.assign(batch_size, 0);
  if (n == 0) {
    out.labels = torch::zeros({batch_size, 0, 1}, fopts.device(device));
    out.boxes = torch::zeros({batch_size, 0, 4}, fopts.device(device));
    out.valid = torch::zeros({batch_size, 0, 1}, fopts.device(device));
    out.first = torch::zeros({batch_size}, torch::TensorOptions().dtype(torch::kLong).device(device));
    return out;
  }
  if (targets.cls.numel() != n || targets.bboxes.dim() != 2 || targets.bboxes.size(0) != n ||
      targets.bboxes.size(1) != 4)
    throw UserError("loss targets: batch_idx, cls and bboxes disagree on the number of instances");

  // Host side: per-image counts and each instance's slot in its image (the only read of target data).
  auto bi = targets.batch_idx.reshape({-1}).to(torch::kCPU).to(torch::kLong);
  auto bi_a = bi.accessor<int64_t, 1>();
  std::vector<int64_t> first(batch_size, 0);
  auto within = torch::empty({n}, torch::kLong);
  auto within_a = within.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t b = bi_a[i];
    if (b < 0 || b >= batch_size) throw UserError("loss targets: batch_idx " + std::to_string(b) + " out of range");
    if (i > 0 && b < bi_a[i - 1]) throw UserError("loss targets: batch_idx must be ascending");
    within_a[i] = out.counts[b]++;
  }
  int64_t max_count = 0;
  for (int64_t b = 0, acc = 0; b < batch_size; ++b) {
    first[b] = acc;
    acc += out.counts[b];
    max_count = std::max(max_count, out.counts[b]);
  }

  // Rows (cls, cx, cy, w, h) packed per image on the targets' device, then moved to `device`.
  const auto src = targets.bboxes.device();
  auto rows = torch::cat({targets.cls.reshape({-1, 1}).to(torch::kFloat), targets.bboxes.to(torch::kFloat)}, 1);
  auto packed = torch::zeros({batch_size, max_count, 5}, fopts.device(src));
  packed.index_put_({upload(bi, src), upload(within, src)}, rows);
  packed = upload(packed, device);

  auto scale = upload(torch::tensor({width, height, width, height}, fopts), device);
  out.labels = packed.narrow(2, 0, 1);
  out.boxes = xywh_to_xyxy(packed.narrow(2, 1, 4) * scale);
  out.valid = (out.boxes.sum(2, true) > 0).to(torch::kFloat);
  out.first = upload(torch::tensor(first, torch::kLong), device);
  return out;
}

}  // namespace lucid::loss
