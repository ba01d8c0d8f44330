// The images and video frames of a prediction, one at a time and in the reference's order: the
// images, then each video's frames (every vid_stride-th: frames vid_stride, 2 vid_stride, ... as
// OpenCV's grab/retrieve loop of the reference takes them). Only the current frame is held, so a
// video of any length streams. A file that cannot be read is warned about and skipped (an error
// when it is the only source); a video whose decoding fails part-way keeps the frames before.
// Images may also be given in memory (the Python package's arrays, PIL images and tensors), each
// under the name its results carry.
#pragma once
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/data/video.h"
#include "lucid/predict/frame_queue.h"

namespace lucid::engine {

struct PredictItem {
  size_t source = 0;  // index into paths(): images first, then videos
  bool video = false;
  int64_t frame = 0;   // videos: the number of this predicted frame, from 1
  int64_t frames = 0;  // videos: frames to predict, the frame count / vid_stride (0: unknown)
  double fps = 0;      // videos: the stream's frame rate (0: unknown)
  data::Image image;
};

// An image of an in-memory prediction: its pixels, or none to decode the file `name`.
struct MemoryImage {
  std::string name;
  std::optional<data::Image> pixels;
};

class PredictStream {
 public:
  PredictStream(const std::vector<std::string>& images, const std::vector<std::string>& videos, int vid_stride);
  // The given images, in order; their names are paths().
  explicit PredictStream(std::vector<MemoryImage> images);
  ~PredictStream();
  // The next image or frame; false when every source is done.
  bool next(PredictItem& item);
  const std::vector<std::string>& paths() const { return paths_; }
  size_t image_count() const { return images_; }
  int64_t skipped() const { return skipped_; }        // files that could not be read
  int64_t incomplete() const { return incomplete_; }  // videos cut short by a decoding error

 private:
  std::vector<std::string> paths_;
  size_t images_ = 0;
  std::vector<std::optional<data::Image>> memory_;  // in-memory images (empty: every image a file)
  int vid_stride_ = 1;
  size_t next_ = 0;  // the next source to open
  // Image files are decoded ahead of next(), each on a thread of its own, at most ahead_limit_
  // at once: decoding, not the forward, bounds a batch-1 prediction of a folder on a GPU.
  void decode_ahead(size_t from);
  std::map<size_t, std::future<data::Image>> ahead_;
  size_t next_decode_ = 0, ahead_limit_ = 1;
  std::unique_ptr<FrameQueue> reader_;
  size_t reader_source_ = 0;
  int64_t frame_ = 0, frames_ = 0;
  int64_t skipped_ = 0, incomplete_ = 0;
};

}  // namespace lucid::engine
