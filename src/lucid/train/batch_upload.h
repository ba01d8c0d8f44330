// The training batches' copy to the device on a stream of its own. The host queues steps ahead of
// the device, so the copy of batch k + 1 runs on the copy engine while the device still computes
// step k, instead of after it on the compute stream. Two device buffers take turns: one is written
// again only once the compute stream has run what read it, and the compute stream waits for a copy
// before reading its buffer. The bytes are the copy's either way.
#pragma once
#include <torch/torch.h>

#include <memory>

namespace lucid::engine {

class BatchUpload {
 public:
  explicit BatchUpload(const torch::Device& device);  // a CUDA device
  ~BatchUpload();
  BatchUpload(const BatchUpload&) = delete;
  BatchUpload& operator=(const BatchUpload&) = delete;

  // host: a host tensor (pinned here if it is not). Returns its copy on the device, ready for work
  // queued next on the current stream; it stays valid until read() and one more upload.
  torch::Tensor operator()(const torch::Tensor& host);
  // The work that reads the last upload is queued on the current stream: its buffer may be written
  // again once that work has run.
  void read();

 private:
  struct Buffers;
  torch::Device device_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace lucid::engine
