// batch=-1 and batch=F (0 < F < 1): AutoBatch, the reference's rule (8.4.190 utils/autobatch.py):
// profile one training forward and backward at a few batch sizes, take the memory each needed
// (reserved after it, plus the reference's estimate of the loss's working set), fit a line to the
// usable points and choose the batch at which it meets F of the memory available to the process,
// never above a batch size whose probe failed nor above the dataset. On a CPU it is not measured:
// the reference's default batch 16, with a warning.
#pragma once
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "lucid/config/model_yaml.h"

namespace lucid::engine {

struct BatchProbe {
  int64_t batch = 0;
  std::optional<double> gib;  // memory the step needed; nullopt: the probe failed (out of memory)
};

// The batch sizes probed: 1..16, and up to 64 on a device of 16 GiB or more; none above the dataset
// (dataset_size > 0).
std::vector<int64_t> probe_batch_sizes(double total_gib, int64_t dataset_size);

// The choice from the probes (in probe_batch_sizes order), the device's total memory and the memory
// available to the process (reserved + free), as the reference: points kept when 0 < gib < total and
// above the previous usable point; least-squares line gib = p0 * batch + p1; batch = int((available *
// fraction - p1) / p0), at most the size before the first failed probe above the first usable one,
// within [first usable, 1024] and at most dataset_size. No usable point: a UserError.
int64_t choose_batch(const std::vector<BatchProbe>& probes, double total_gib, double available_gib, double fraction,
                     int64_t dataset_size);

// The reference's envelope of the loss's memory (GiB) at `batch` images of `anchors` anchors.
double loss_memory_gib(int64_t batch, int64_t anchors, int64_t max_num_obj, int64_t nc);

struct AutoBatchRequest {
  config::ModelSpec spec;  // the model trained (a fresh copy of it is profiled)
  torch::Device device{torch::kCPU};
  int64_t imgsz = 640;  // the largest training size (multi_scale's upper end)
  double fraction = 0.6;
  bool amp = true;          // BF16 autocast, as the fit
  int64_t max_num_obj = 0;  // 4 x the most instances of a training image (mosaic)
  int64_t dataset_size = 0;
};

// Measures and chooses; prints the reference's lines (probes, the choice and its predicted memory).
int64_t auto_batch(const AutoBatchRequest& request);

}  // namespace lucid::engine
