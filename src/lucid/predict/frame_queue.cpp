#include "lucid/predict/frame_queue.h"

#include <algorithm>
#include <utility>

namespace lucid::engine {

FrameQueue::FrameQueue(const std::string& path, int vid_stride, size_t depth)
    : reader_(std::make_unique<data::VideoReader>(path)), depth_(std::max<size_t>(depth, 1)) {
  fps_ = reader_->fps();
  frame_count_ = reader_->frame_count();
  thread_ = std::thread([this, vid_stride] { read(vid_stride); });
}

FrameQueue::~FrameQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void FrameQueue::read(int vid_stride) {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || frames_.size() < depth_; });
        if (stopping_) return;
      }
      bool ok = true;
      for (int k = 1; ok && k < vid_stride; ++k) ok = reader_->skip();
      data::Image frame;
      if (ok) ok = reader_->read(frame);
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok) {
        ended_ = true;
        break;
      }
      frames_.push_back(std::move(frame));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    ended_ = true;
  }
  changed_.notify_all();
}

bool FrameQueue::pop(data::Image& frame) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !frames_.empty() || ended_; });
  if (!frames_.empty()) {
    frame = std::move(frames_.front());
    frames_.pop_front();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return false;
}

}  // namespace lucid::engine
