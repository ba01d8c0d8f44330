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

void ShapeLookahead::read(std::vector<LookaheadImage> images, size_t batch, PredictOptions o) {
  std::vector<std::pair<int, int>> sizes;
  auto ask = [&] {
    const auto [h, w] = batch_input_shape(network_, sizes, o.imgsz);
    network_.prepare(network_.key(static_cast<int64_t>(sizes.size()), h, w, network_top_k(o), o.agnostic_nms));
    sizes.clear();
  };
  for (const auto& image : images) {
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
  network.prepare(key);
  network.wait(key);
  // The first batch once more, discarded: what prediction sets up once on the predictor's own thread
  // (cuBLAS for the masks, the first launch of each postprocess kernel) is not charged to it.
  predict_images(network, images, o);
}

}  // namespace lucid::engine
