// multi_scale=M: the reference's per-batch random training size (8.4.190
// DetectionTrainer.preprocess_batch): size = randrange(max(stride, int(imgsz * (1 - M))),
// int(imgsz * (1 + M) + stride)) // stride * stride, and the batch's float images resized
// (bilinear, align_corners=False) by size / their longer side, each side rounded up to a multiple
// of the stride. Boxes are normalised and mask targets keep their size (the loss meets the mask
// prototypes at the targets' size), so targets are untouched. The draw comes from the
// MultiScale stream of (seed, epoch, batch number) instead of Python's global random.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace lucid::engine {

int64_t multi_scale_size(int64_t imgsz, double multi_scale, int64_t stride, uint64_t seed, int64_t epoch,
                         int64_t batch_number);

// x: (B, 3, H, W) float images; returned as they are when size / max(H, W) is 1.
torch::Tensor multi_scale_resize(const torch::Tensor& x, int64_t size, int64_t stride);

}  // namespace lucid::engine
