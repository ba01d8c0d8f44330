// A video's frames read on a thread of their own, a few ahead of the predictor: decoding a 720p
// frame takes about as long as a replayed forward, and the two then overlap. The queue holds at most
// `depth` frames, so a video of any length streams at constant memory.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lucid/data/video.h"

namespace lucid::engine {

class FrameQueue {
 public:
  // Opens the video (UserError as VideoReader's) and starts reading every vid_stride-th frame.
  FrameQueue(const std::string& path, int vid_stride, size_t depth = 4);
  ~FrameQueue();  // stops the reading thread
  FrameQueue(const FrameQueue&) = delete;
  FrameQueue& operator=(const FrameQueue&) = delete;

  double fps() const { return fps_; }
  int64_t frame_count() const { return frame_count_; }
  // The next frame; false at the video's end. A frame that could not be decoded rethrows the
  // reader's UserError here, in order, after the frames before it.
  bool pop(data::Image& frame);

 private:
  void read(int vid_stride);

  std::unique_ptr<data::VideoReader> reader_;
  double fps_ = 0;
  int64_t frame_count_ = 0;
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<data::Image> frames_;
  bool ended_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace lucid::engine
