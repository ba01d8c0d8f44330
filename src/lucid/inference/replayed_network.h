// Prediction's forward on a GPU recorded once per input shape as a CUDA graph and replayed. At small
// batches the eager forward is bound by launching several hundred kernels one by one; a replay
// launches them at once. A new shape also costs cuDNN a plan per convolution (130-650 ms for a
// network, docs/performance.md), which the predictor should not pay in front of an image: so a
// recording is made on a thread of its own, where the forward runs once (cuDNN's plans, which ATen
// keeps per thread, are built there) and is then captured into the graph. prepare() starts the
// recordings of shapes that images ahead will need, several in parallel; run() replays the
// recording of its input, waiting for it while it is being made and asking for it when nobody did.
// The recorded kernels are the eager forward's own, so a replay writes the eager forward's bytes.
#pragma once
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "lucid/inference/network.h"

namespace lucid::engine {

// The input a recording serves: images (batch, 3, height, width) and, for a network whose output
// is its own top-k (end-to-end), the top-k's size and class-agnosticism.
struct ReplayKey {
  int64_t batch = 1, height = 0, width = 0, max_det = 0;
  bool agnostic = false;
  auto tie() const { return std::tie(batch, height, width, max_det, agnostic); }
  bool operator<(const ReplayKey& o) const { return tie() < o.tie(); }
};

class ReplayedNetwork : public Network {
 public:
  // threads: recordings made at once (at least 1). At most max_recordings shapes are kept; inputs
  // of further shapes run eagerly, which the first such input says once on stderr.
  ReplayedNetwork(std::unique_ptr<EagerNetwork> eager, int threads, int max_recordings = 64);
  ~ReplayedNetwork() override;
  ReplayedNetwork(const ReplayedNetwork&) = delete;
  ReplayedNetwork& operator=(const ReplayedNetwork&) = delete;

  NetworkOutputs run(const Tensor& images, int64_t max_det, bool agnostic) override;
  bool end2end() const override { return eager_->end2end(); }
  int64_t nc() const override { return eager_->nc(); }
  torch::Device device() const override { return eager_->device(); }
  int pad_multiple(int imgsz) const override { return eager_->pad_multiple(imgsz); }

  // The key of run(images of this shape, max_det, agnostic).
  ReplayKey key(int64_t batch, int64_t height, int64_t width, int64_t max_det, bool agnostic) const;
  // Starts the recording of key unless it exists or is under way; returns at once.
  void prepare(const ReplayKey& key);
  // Blocks until key's recording is made (or failed); false when none was asked for.
  bool wait(const ReplayKey& key);
  bool ready(const ReplayKey& key) const;  // recorded and replayable now
  int64_t recorded() const;                // recordings made so far

 private:
  struct Recording;
  std::shared_ptr<Recording> find_or_add(const ReplayKey& key, bool& added);
  void worker();
  void record(const ReplayKey& key, Recording& r);
  NetworkOutputs replay(Recording& r, const Tensor& images);

  std::unique_ptr<EagerNetwork> eager_;
  int threads_;
  size_t max_recordings_;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::map<ReplayKey, std::shared_ptr<Recording>> recordings_;
  std::deque<std::pair<ReplayKey, std::shared_ptr<Recording>>> queue_;
  std::vector<std::thread> workers_;
  bool stopping_ = false, full_warned_ = false;
};

// The network prediction runs on device: a ReplayedNetwork around an eager network on a GPU (unless
// LUCID_PREDICT_REPLAY=0, which keeps the eager forward, e.g. to compare the two), else network as it is.
std::unique_ptr<Network> replayed_on_gpu(std::unique_ptr<Network> network);

}  // namespace lucid::engine
