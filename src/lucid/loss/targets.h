// The batch targets the loss consumes, mirroring the reference's batch dict, and their per-image
// padded form of a fixed instance capacity (the capacity bucket).
#pragma once
#include <torch/torch.h>

#include <vector>

namespace lucid::loss {

using torch::Tensor;

// Instances of a batch of B images, concatenated image by image (batch_idx ascending). Any device;
// CPU (ideally pinned) tensors cost no device synchronisation: pad_targets reads the per-image
// counts on the host.
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

// Capacity buckets: the instance capacity M per image is 0 for a batch without instances, else the
// smallest power of two holding the fullest image: 1, 2, 4, ..., kLargestListedCapacity. A batch
// beyond that still gets the next power of two (1024, 2048, ...), so the number of distinct shapes,
// and of recordings keyed on them, grows only with log2 of the largest instance count ever seen.
constexpr int64_t kLargestListedCapacity = 512;
int64_t capacity_bucket(int64_t max_count);

// The smallest capacity a fit pads a batch with instances to: the bucket of the training images'
// 99th-percentile instance count (0 for none). A mosaic batch seldom needs less than one image's
// worth, and every smaller bucket would be a shape of its own (a recording under capture_step) to
// save a padding that costs little; the percentile keeps a few crowded images from setting it.
int64_t capacity_floor(std::vector<int64_t> image_instances);

// Instances per image of a batch of `batch_size` images (a host read: free when batch_idx is a CPU
// tensor, one device synchronisation otherwise). Throws UserError if batch_idx is not ascending or
// out of range.
std::vector<int64_t> instance_counts(const SegTargets& targets, int64_t batch_size);

// Per-image padded ground truth in input pixels: the reference's preprocessed targets, every tensor
// of a shape fixed by (B, M, Hm, Wm) and the mask mode. Padding slots are all zero (invalid).
struct PaddedTargets {
  Tensor labels;  // (B, M, 1) float class ids (0 in padding)
  Tensor boxes;   // (B, M, 4) float xyxy pixels (0 in padding)
  Tensor valid;   // (B, M, 1) float 1 for real instances (box coordinates sum > 0, as the reference)
  // overlap mode:  (B, Hm, Wm) index map, uint8 (int32 when M >= 256: the dtype follows the bucket);
  // otherwise:     (B, M, Hm, Wm) uint8 0/1 per slot (zero in padding).
  // Undefined only for a batch without instances whose targets had no masks.
  Tensor masks;
  Tensor sem_masks;  // (B, Hm, Wm) as given (undefined when not given)
  bool overlap = true;

  int64_t batch_size() const { return labels.size(0); }
  int64_t capacity() const { return labels.size(1); }  // M, the bucket
};

// The overlap index map's dtype for capacity `capacity` (uint8 holds instance numbers up to 255).
torch::ScalarType overlap_mask_dtype(int64_t capacity);

// Packs targets for a batch of `batch_size` images of size (height, width) pixels, padded to
// `capacity` instances per image (-1: the batch's bucket, capacity_bucket of its fullest image, and
// at least min_capacity when the batch holds an instance).
// Runs where the targets live (the host in training) and reads their per-image counts there.
// Throws UserError if batch_idx is not ascending or out of range, if the tensors disagree on the
// number of instances or images, or if an image holds more than `capacity` instances.
PaddedTargets pad_targets(const SegTargets& targets, int64_t batch_size, double height, double width, bool overlap_mask,
                          int64_t capacity = -1, int64_t min_capacity = 0);

// Copies a tensor to `device`; a CPU source is pinned first so that the copy does not block.
Tensor upload(const Tensor& t, const torch::Device& device);
// Every tensor of `targets` uploaded that way.
PaddedTargets upload(const PaddedTargets& targets, const torch::Device& device);

// Copies `src` into `dst`, tensor by tensor, without blocking (dst: static buffers, e.g. the inputs
// of a recording, allocated once as upload(first targets of the bucket)). Throws
// std::invalid_argument when a shape or the mask mode differs: a different bucket needs other buffers.
void copy_targets(const PaddedTargets& src, PaddedTargets& dst);

}  // namespace lucid::loss
