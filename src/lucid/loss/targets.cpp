#include "lucid/loss/targets.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lucid/loss/boxes.h"
#include "lucid/util/error.h"

namespace lucid::loss {

int64_t capacity_bucket(int64_t max_count) {
  if (max_count < 0) throw std::invalid_argument("capacity_bucket: negative instance count");
  if (max_count == 0) return 0;
  int64_t c = 1;
  while (c < max_count) c *= 2;
  return c;
}

torch::ScalarType overlap_mask_dtype(int64_t capacity) { return capacity >= 256 ? torch::kInt32 : torch::kUInt8; }

Tensor upload(const Tensor& t, const torch::Device& device) {
  if (!t.defined() || t.device() == device) return t;
  if (t.is_cpu() && device.is_cuda()) return t.pin_memory().to(device, /*non_blocking=*/true);
  return t.to(device);
}

PaddedTargets upload(const PaddedTargets& targets, const torch::Device& device) {
  PaddedTargets out = targets;
  for (Tensor* t : {&out.labels, &out.boxes, &out.valid, &out.masks, &out.sem_masks}) *t = upload(*t, device);
  return out;
}

void copy_targets(const PaddedTargets& src, PaddedTargets& dst) {
  if (src.overlap != dst.overlap) throw std::invalid_argument("copy_targets: the mask modes differ");
  const std::pair<const Tensor*, Tensor*> pairs[] = {{&src.labels, &dst.labels},
                                                     {&src.boxes, &dst.boxes},
                                                     {&src.valid, &dst.valid},
                                                     {&src.masks, &dst.masks},
                                                     {&src.sem_masks, &dst.sem_masks}};
  for (const auto& [from, to] : pairs) {
    if (from->defined() != to->defined() || (from->defined() && from->sizes() != to->sizes()))
      throw std::invalid_argument("copy_targets: the targets' shapes differ (another capacity bucket or input size)");
  }
  for (const auto& [from, to] : pairs)
    if (from->defined()) to->copy_(*from, /*non_blocking=*/true);
}

std::vector<int64_t> instance_counts(const SegTargets& targets, int64_t batch_size) {
  std::vector<int64_t> counts(batch_size, 0);
  const int64_t n = targets.size();
  if (n == 0) return counts;
  auto bi = targets.batch_idx.reshape({-1}).to(torch::kCPU).to(torch::kLong).contiguous();
  const int64_t* b = bi.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (b[i] < 0 || b[i] >= batch_size)
      throw UserError("loss targets: batch_idx " + std::to_string(b[i]) + " out of range for a batch of " +
                      std::to_string(batch_size));
    if (i > 0 && b[i] < b[i - 1]) throw UserError("loss targets: batch_idx must be ascending");
    ++counts[b[i]];
  }
  return counts;
}

int64_t capacity_floor(std::vector<int64_t> image_instances) {
  if (image_instances.empty()) return 0;
  std::sort(image_instances.begin(), image_instances.end());
  const auto n = static_cast<double>(image_instances.size());
  const auto at = static_cast<size_t>(std::max(0.0, std::ceil(0.99 * n) - 1));
  return capacity_bucket(image_instances[at]);
}

PaddedTargets pad_targets(const SegTargets& targets, int64_t batch_size, double height, double width, bool overlap_mask,
                          int64_t capacity, int64_t min_capacity) {
  const int64_t n = targets.size();
  if (n > 0 && (targets.cls.numel() != n || targets.bboxes.dim() != 2 || targets.bboxes.size(0) != n ||
                targets.bboxes.size(1) != 4))
    throw UserError("loss targets: batch_idx, cls and bboxes disagree on the number of instances");
  const auto counts = instance_counts(targets, batch_size);
  int64_t max_count = 0;
  for (auto c : counts) max_count = std::max(max_count, c);
  if (capacity < 0) capacity = max_count > 0 ? std::max(capacity_bucket(max_count), min_capacity) : 0;
  if (capacity < max_count)
    throw UserError("loss targets: an image holds " + std::to_string(max_count) +
                    " instances, more than the capacity " + std::to_string(capacity));

  const auto src =
      n > 0 ? targets.bboxes.device() : (targets.masks.defined() ? targets.masks.device() : torch::Device(torch::kCPU));
  const auto fopts = torch::TensorOptions().dtype(torch::kFloat).device(src);
  // Each instance's slot in its image (host), then rows (cls, cx, cy, w, h) packed per image.
  auto bi = torch::empty({n}, torch::kLong), within = torch::empty({n}, torch::kLong);
  if (n > 0) {
    bi.copy_(targets.batch_idx.reshape({-1}).to(torch::kCPU).to(torch::kLong));
    auto b = bi.accessor<int64_t, 1>();
    auto w = within.accessor<int64_t, 1>();
    for (int64_t i = 0, prev = -1, k = 0; i < n; prev = b[i], ++i) {
      k = b[i] == prev ? k + 1 : 0;
      w[i] = k;
    }
  }
  auto bi_src = bi.to(src), within_src = within.to(src);
  auto packed = torch::zeros({batch_size, capacity, 5}, fopts);
  if (n > 0) {
    auto rows = torch::cat({targets.cls.reshape({-1, 1}).to(torch::kFloat), targets.bboxes.to(torch::kFloat)}, 1);
    packed.index_put_({bi_src, within_src}, rows);
  }

  PaddedTargets out;
  out.overlap = overlap_mask;
  auto scale = torch::tensor({width, height, width, height}, fopts);
  out.labels = packed.narrow(2, 0, 1).contiguous();
  out.boxes = xywh_to_xyxy(packed.narrow(2, 1, 4) * scale).contiguous();
  out.valid = (out.boxes.sum(2, true) > 0).to(torch::kFloat);

  const auto& m = targets.masks;
  if (!m.defined()) {
    if (n > 0) throw UserError("loss targets: masks are missing");
  } else if (overlap_mask) {
    if (m.dim() != 3 || m.size(0) != batch_size)
      throw UserError("loss targets: masks must be (" + std::to_string(batch_size) + ", Hm, Wm) in overlap mode");
    out.masks = m.to(overlap_mask_dtype(capacity)).contiguous();
  } else {
    if (m.dim() != 3 || m.size(0) != n)
      throw UserError("loss targets: masks must be (" + std::to_string(n) + ", Hm, Wm) in per-instance mode");
    out.masks = torch::zeros({batch_size, capacity, m.size(1), m.size(2)}, m.options().dtype(torch::kUInt8));
    if (n > 0) out.masks.index_put_({bi_src.to(m.device()), within_src.to(m.device())}, m.to(torch::kUInt8));
  }
  if (targets.sem_masks.defined()) {
    if (targets.sem_masks.dim() != 3 || targets.sem_masks.size(0) != batch_size)
      throw UserError("loss targets: sem_masks must be (" + std::to_string(batch_size) + ", Hm, Wm)");
    out.sem_masks = targets.sem_masks.contiguous();
  }
  return out;
}

}  // namespace lucid::loss
