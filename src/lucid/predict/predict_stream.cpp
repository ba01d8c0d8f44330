#include "lucid/predict/predict_stream.h"

#include <cstdio>

#include "lucid/util/error.h"
#include "lucid/util/parallel.h"

namespace lucid::engine {

PredictStream::PredictStream(const std::vector<std::string>& images, const std::vector<std::string>& videos,
                             int vid_stride)
    : images_(images.size()), vid_stride_(vid_stride), ahead_limit_(std::min(util::cpu_count(), 8)) {
  if (vid_stride < 1) throw std::invalid_argument("PredictStream: vid_stride < 1");
  paths_ = images;
  paths_.insert(paths_.end(), videos.begin(), videos.end());
}

PredictStream::PredictStream(std::vector<MemoryImage> images)
    : images_(images.size()), ahead_limit_(std::min(util::cpu_count(), 8)) {
  for (auto& m : images) {
    paths_.push_back(std::move(m.name));
    memory_.push_back(std::move(m.pixels));
  }
}

PredictStream::~PredictStream() = default;

void PredictStream::decode_ahead(size_t from) {
  for (; next_decode_ < images_ && next_decode_ < from + ahead_limit_; ++next_decode_) {
    const size_t k = next_decode_;
    if (k < memory_.size() && memory_[k]) continue;  // pixels given: nothing to decode
    ahead_.emplace(k, std::async(std::launch::async, [path = paths_[k]] { return data::decode_image(path); }));
  }
}

bool PredictStream::next(PredictItem& item) {
  const bool only = paths_.size() == 1;  // the one source asked for: its error is the command's
  for (;;) {
    if (reader_) {
      try {
        if (reader_->pop(item.image)) {
          item.source = reader_source_;
          item.video = true;
          item.frame = ++frame_;
          item.frames = frames_;
          item.fps = reader_->fps();
          return true;
        }
      } catch (const UserError& e) {
        if (only && frame_ == 0) throw;
        std::fprintf(stderr, "warning: %s; the rest of the video is skipped\n", e.what());
        ++incomplete_;
      }
      reader_.reset();
      continue;
    }
    if (next_ >= paths_.size()) return false;
    const size_t k = next_++;
    const auto& path = paths_[k];
    try {
      if (k < images_) {
        if (k < memory_.size() && memory_[k]) {
          item.image = std::move(*memory_[k]);
          memory_[k].reset();  // held once, as a file's decoded pixels
        } else {
          decode_ahead(k);
          auto decoded = ahead_.extract(k);
          // The decoder's UserError comes out of get() as decoding here would throw it.
          item.image = decoded ? decoded.mapped().get() : data::decode_image(path);
        }
        item.source = k;
        item.video = false;
        item.frame = item.frames = 0;
        item.fps = 0;
        return true;
      }
      reader_ = std::make_unique<FrameQueue>(path, vid_stride_);
      reader_source_ = k;
      frame_ = 0;
      frames_ = reader_->frame_count() / vid_stride_;
    } catch (const UserError& e) {
      if (only) throw;
      std::fprintf(stderr, "warning: %s; %s skipped\n", e.what(), k < images_ ? "image" : "video");
      ++skipped_;
    }
  }
}

}  // namespace lucid::engine
