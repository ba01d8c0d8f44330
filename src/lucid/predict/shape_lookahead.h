// Prediction's input shapes ahead of its images. A new input shape costs a recording of the forward
// (inference/replayed_network.h); made when its first image arrives, that is a stall of 100-600 ms
// in front of it. A thread reads the headers of the image files to come (a few microseconds each,
// no decoding), or takes the sizes of images given in memory, groups them into the batches the
// predictor forms and asks the network to record each batch's input shape, in the order of first
// need, while the predictor works through the images before.
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lucid/inference/replayed_network.h"
#include "lucid/predict/predictor.h"

namespace lucid::engine {

struct LookaheadImage {
  std::string path;
  int height = 0, width = 0;  // 0: read from path's header
};

class ShapeLookahead {
 public:
  // images in the order they are predicted, `batch` per forward. A file whose header cannot be read
  // is left out, as the prediction skips it.
  ShapeLookahead(ReplayedNetwork& network, std::vector<LookaheadImage> images, size_t batch,
                 const PredictOptions& options);
  ~ShapeLookahead();  // stops the reading (recordings asked for go on)
  ShapeLookahead(const ShapeLookahead&) = delete;
  ShapeLookahead& operator=(const ShapeLookahead&) = delete;

  // Blocks until the shapes of the first `images` images (all, where there are fewer) are recorded:
  // before the first image, so that no image of them waits for a recording in front of it. The
  // shapes of the images after them are recorded while those are predicted.
  void settle(size_t images);

 private:
  void read(std::vector<LookaheadImage> images, size_t batch, PredictOptions options);

  ReplayedNetwork& network_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // asked_, read_, finished_
  std::condition_variable progressed_;
  std::vector<ReplayKey> asked_;  // in the order asked
  size_t read_ = 0;               // images whose shapes were asked for
  bool finished_ = false;
  std::thread thread_;
};

// Before a stream's first forward, as the reference's predictor warms its model up: records the
// input of this first batch, waits for it and, where it was not recorded before, predicts the batch
// once, so that the first image's time is not set-up.
void warm_up(ReplayedNetwork& network, std::span<const data::Image> images, const PredictOptions& options);

}  // namespace lucid::engine
