// The batch targets the loss consumes, mirroring the reference's batch dict, and their per-image
// padded form.
#pragma once
#include <torch/torch.h>

namespace lucid::loss {

using torch::Tensor;

// Instances of a batch of B images, concatenated image by image (batch_idx ascending). Any device;
// CPU (ideally pinned) tensors cost no device synchronisation: the loss reads the per-image counts
// on the host and uploads the rest without blocking.
struct SegTargets {
  Tensor batch_idx;  // (N) image index of each instance, ascending (integer or float)
  Tensor cls;        // (N) or (N, 1) class id (integer or float)
  Tensor bboxes;     // (N, 4) normalised (cx, cy, w, h) in [0, 1] of the network input
  // Instance masks at the prototype resolution (input / 4):
  //   overlap mode:  (B, Hm, Wm) integer map; value k+1 marks the k-th instance of that image, 0 is
  //                  background. Labels must then be in area-descending order (the reference's
  //                  dataloader order) so that smaller instances own the overlapped pixels.
  //   otherwise:     (N, Hm, Wm) 0/1, one per instance, in instance order.
  Tensor masks;
  // (B, Hm, Wm) class id per pixel for the semantic loss (YOLO26); pixels no instance covers are
  // ignored but must still hold a valid class id (0 is fine). May be undefined for heads without a
  // semantic branch.
  Tensor sem_masks;

  int64_t size() const { return batch_idx.defined() ? batch_idx.numel() : 0; }
};

// Per-image padded ground truth in input pixels: the reference's preprocessed targets.
struct PaddedTargets {
  Tensor labels;  // (B, M, 1) float class ids (0 in padding)
  Tensor boxes;   // (B, M, 4) float xyxy pixels (0 in padding)
  Tensor valid;   // (B, M, 1) float 1 for real instances (box coordinates sum > 0)
  std::vector<int64_t> counts;  // instances per image (host)
  Tensor first;   // (B) int64 index of each image's first instance in the flat lists (device)
  int64_t max_count() const { return labels.size(1); }
};

// Packs targets for a batch of `batch_size` images of size (height, width) pixels onto `device`.
// Reads the per-image counts on the host: free when batch_idx is a CPU tensor, one device
// synchronisation otherwise. Throws if batch_idx is not ascending or out of range.
PaddedTargets pad_targets(const SegTargets& targets, int64_t batch_size, double height, double width,
                          const torch::Device& device);

// Copies a tensor to `device`; a CPU source is pinned first so that the copy does not block.
Tensor upload(const Tensor& t, const torch::Device& device);

}  // namespace lucid::loss
