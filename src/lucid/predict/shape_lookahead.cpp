#include "lucid/predict/shape_lookahead.h"

#include "lucid/data/image_io.h"

namespace lucid::engine {

ShapeLookahead::ShapeLookahead(ReplayedNetwork& network, std::vector<LookaheadImage> images, size_t batch,
                               const PredictOptions& options)
    : network_(network) {
  if (images.empty() || batch == 0) return;
  thread_ = std::thread(
      [this, images = std::move(images), batch, options]() mutable { read(std::move(images), batch, options); });
}

ShapeLookahead::~ShapeLookahead() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ShapeLookahead::settle(size_t images) {
  std::vector<ReplayKey> keys;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    progressed_.wait(lock, [&] { return finished_ || read_ >= images || !thread_.joinable(); });
    keys = asked_;
  }
  for (const auto& k : keys) network_.wait(k);
}

void ShapeLookahead::read(std::vector<LookaheadImage> images, size_t batch, PredictOptions o) {
  std::vector<std::pair<int, int>> sizes;
  size_t seen = 0;  // images taken from the list, read or skipped
  auto ask = [&] {
    const auto [h, w] = batch_input_shape(network_, sizes, o.imgsz);
    const auto key = network_.key(static_cast<int64_t>(sizes.size()), h, w, network_top_k(o), o.agnostic_nms);
    network_.prepare(key);
    sizes.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    asked_.push_back(key);
    read_ = seen;
    progressed_.notify_all();
  };
  // Whatever ends the reading (the end, stop_, an exception) wakes settle().
  struct Finish {
    ShapeLookahead& l;
    ~Finish() {
      std::lock_guard<std::mutex> lock(l.mutex_);
      l.finished_ = true;
      l.progressed_.notify_all();
    }
  } finish{*this};
  for (const auto& image : images) {
    ++seen;
    if (stop_) return;
    if (image.height > 0 && image.width > 0) {
      sizes.emplace_back(image.height, image.width);
    } else {
      try {
        const auto info = data::read_image_info(image.path);
        sizes.emplace_back(info.height(), info.width());
      } catch (const std::exception&) {
        continue;  // the prediction warns about it and skips it
      }
    }
    if (sizes.size() == batch) ask();
  }
  if (!sizes.empty()) ask();
}

void warm_up(ReplayedNetwork& network, std::span<const data::Image> images, const PredictOptions& o) {
  std::vector<std::pair<int, int>> sizes;
  for (const auto& image : images) sizes.emplace_back(image.height, image.width);
  const auto [h, w] = batch_input_shape(network, sizes, o.imgsz);
  const auto key = network.key(static_cast<int64_t>(sizes.size()), h, w, network_top_k(o), o.agnostic_nms);
  if (network.ready(key)) return;  // recorded by an earlier stream of this process: warm already
  network.prepare(key);
  network.wait(key);
  // The first batch once more, discarded: what prediction sets up once on the predictor's own thread
  // (cuBLAS for the masks, the first launch of each postprocess kernel) is not charged to it.
  predict_images(network, images, o);
  warm_postprocess(network, images, o);
}

}  // namespace lucid::engine
