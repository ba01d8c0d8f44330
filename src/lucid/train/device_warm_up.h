// The device's set-up for a fit's training input shapes, made before the first step. On a GPU a new
// input shape's first forward and backward pays cuDNN's engine heuristics and execution plans for
// every convolution (kept per thread: only the fit's own thread can make them for it) and the first
// use of each kernel module: seconds, against milliseconds for a step once set up. Made here on a
// scratch network of the fit's architecture, on the fit's thread, while other threads prepare the
// data, those seconds leave the first epoch and overlap the image cache's build.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "lucid/config/model_yaml.h"

namespace lucid::engine {

struct WarmUpRequest {
  config::ModelSpec spec;  // the fit's architecture, with the dataset's classes
  torch::Device device{torch::kCPU};
  std::vector<int64_t> batches;  // the training batch and, if any, the partial last batch
  int64_t imgsz = 640;
  bool autocast = false;      // the fit's BF16 autocast
  bool deterministic = true;  // the fit's algorithm settings, which cuDNN's plans depend on
};

// The batch sizes of an epoch of `images` training images in batches of `batch`: the batch and the
// partial last batch, if there is one.
std::vector<int64_t> epoch_batch_sizes(int64_t images, int64_t batch);

// The global algorithm settings of a fit (deterministic=True: deterministic algorithms, cuDNN
// deterministic and not benchmarking), applied by the trainer and before a warm-up alike.
void use_fit_algorithms(bool deterministic);

// One forward (in training mode, under the fit's autocast) and backward of a scratch network per
// batch size, on zero images of the fit's shape, channels_last as fits run; then the scratch memory
// is returned to the device. Leaves no state behind: not the CPU generator's (the network's
// initialisation), not any tensor of the fit. Does nothing off CUDA. Returns the seconds spent.
double warm_up_device(const WarmUpRequest& request);

}  // namespace lucid::engine
