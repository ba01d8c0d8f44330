// The inference API of lucid.h over the engine: model files through engine::load_network,
// prediction through engine::predict_images, drawing through plot::draw_instances, with lucid's
// tensors turned into plain structures at the boundary.
#include "lucid/lucid.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "lucid/config/options.h"
#include "lucid/data/image_io.h"
#include "lucid/deploy/load_network.h"
#include "lucid/inference/network.h"
#include "lucid/inference/replayed_network.h"
#include "lucid/plot/annotate.h"
#include "lucid/plot/canvas.h"
#include "lucid/predict/predictor.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

namespace lucid {

namespace {

// The largest image a buffer may describe, as for decoded files.
constexpr int64_t kMaxPixels = int64_t(1) << 28;

data::Image copy_image(const ImageView& view) {
  if (view.pixels == nullptr) throw UserError("ImageView: pixels is null");
  if (view.width <= 0 || view.height <= 0)
    throw UserError("ImageView: size " + std::to_string(view.width) + "x" + std::to_string(view.height) +
                    ": expected a positive width and height");
  if (int64_t(view.width) * view.height > kMaxPixels)
    throw UserError("ImageView: " + std::to_string(view.width) + "x" + std::to_string(view.height) +
                    " is larger than " + std::to_string(kMaxPixels) + " pixels");
  if (view.channels != 3 && view.channels != 4)
    throw UserError("ImageView: channels=" + std::to_string(view.channels) + ": expected 3 (RGB) or 4 (RGBA)");
  const size_t row = size_t(view.width) * view.channels;
  const size_t stride = view.stride == 0 ? row : view.stride;
  if (stride < row)
    throw UserError("ImageView: stride " + std::to_string(view.stride) + " is less than a row (" + std::to_string(row) +
                    " bytes)");
  data::Image image(view.height, view.width, 3);
  for (int y = 0; y < view.height; ++y) {
    const uint8_t* src = view.pixels + size_t(y) * stride;
    uint8_t* dst = image.at(y, 0);
    if (view.channels == 3) {
      std::copy(src, src + row, dst);
    } else {
      for (int x = 0; x < view.width; ++x) std::copy(src + size_t(x) * 4, src + size_t(x) * 4 + 3, dst + size_t(x) * 3);
    }
  }
  return image;
}

Result to_result(const engine::Prediction& p, const std::vector<std::string>& names) {
  Result r;
  r.width = p.orig_w;
  r.height = p.orig_h;
  const int64_t n = p.boxes.size(0);
  const auto boxes = p.boxes.contiguous();
  const auto conf = p.conf.to(torch::kFloat32).contiguous();
  const auto cls = p.cls.to(torch::kInt64).contiguous();
  const float* b = boxes.data_ptr<float>();
  r.detections.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& d = r.detections[static_cast<size_t>(i)];
    d.x1 = b[i * 4];
    d.y1 = b[i * 4 + 1];
    d.x2 = b[i * 4 + 2];
    d.y2 = b[i * 4 + 3];
    d.class_id = static_cast<int>(cls.data_ptr<int64_t>()[i]);
    d.class_name = names[static_cast<size_t>(d.class_id)];
    d.score = conf.data_ptr<float>()[i];
    const auto& w = p.masks[static_cast<size_t>(i)];
    d.mask.x0 = w.x0;
    d.mask.y0 = w.y0;
    d.mask.width = w.width();
    d.mask.height = w.height();
    const uint8_t* px = w.pixels.data_ptr<uint8_t>();
    d.mask.pixels.assign(px, px + w.pixels.numel());
  }
  return r;
}

}  // namespace

bool Mask::contains(int x, int y) const {
  const int i = x - x0, j = y - y0;
  return i >= 0 && j >= 0 && i < width && j < height && pixels[size_t(j) * width + i] != 0;
}

std::vector<uint8_t> Mask::full(int image_width, int image_height) const {
  std::vector<uint8_t> out(size_t(std::max(image_width, 0)) * std::max(image_height, 0), 0);
  for (int j = 0; j < height; ++j) {
    const int y = y0 + j;
    if (y < 0 || y >= image_height) continue;
    for (int i = 0; i < width; ++i) {
      const int x = x0 + i;
      if (x >= 0 && x < image_width) out[size_t(y) * image_width + x] = pixels[size_t(j) * width + i];
    }
  }
  return out;
}

int64_t Mask::area() const {
  return std::count_if(pixels.begin(), pixels.end(), [](uint8_t v) { return v != 0; });
}

struct Model::Impl {
  torch::Device device{torch::kCPU};
  engine::LoadedNetwork loaded;  // the eager model, or a compiled package (.pt2)
  std::optional<bool> nms;       // the head it was loaded with (Model's nms)
  std::vector<std::string> names;
  // The eager model's network per (precision, head), kept across calls: on a GPU its forward is
  // recorded once per input shape and replayed (inference/replayed_network.h).
  std::mutex networks_mutex;
  std::map<std::pair<bool, int>, std::unique_ptr<engine::Network>> eager_networks;

  engine::Network& eager_network(bool amp, const std::optional<bool>& head) {
    std::lock_guard<std::mutex> lock(networks_mutex);
    auto& n = eager_networks[{amp, head ? static_cast<int>(*head) : -1}];
    if (!n) n = engine::replayed_on_gpu(std::make_unique<engine::EagerNetwork>(*loaded.model, device, amp, head));
    return *n;
  }

  engine::PredictOptions engine_options(const PredictOptions& o) const {
    engine::PredictOptions e;
    const int imgsz = o.imgsz > 0 ? o.imgsz : loaded.imgsz > 0 ? static_cast<int>(loaded.imgsz) : 640;
    if (o.imgsz < 0 || imgsz % 32 != 0 || imgsz > config::kMaxImgsz)
      throw UserError("PredictOptions::imgsz=" + std::to_string(o.imgsz) + ": expected a multiple of 32 up to " +
                      std::to_string(config::kMaxImgsz) + ", or 0 for the model file's");
    if (loaded.fixed_imgsz && imgsz != loaded.imgsz)
      throw UserError("PredictOptions::imgsz=" + std::to_string(o.imgsz) +
                      ": the compiled package takes imgsz=" + std::to_string(loaded.imgsz) + " only");
    e.imgsz = imgsz;
    if (!(o.conf >= 0 && o.conf <= 1))
      throw UserError("PredictOptions::conf=" + std::to_string(o.conf) + ": expected 0..1");
    if (!(o.iou >= 0 && o.iou <= 1))
      throw UserError("PredictOptions::iou=" + std::to_string(o.iou) + ": expected 0..1");
    if (o.max_det < 1)
      throw UserError("PredictOptions::max_det=" + std::to_string(o.max_det) + ": expected a positive integer");
    e.conf = o.conf;
    e.iou = o.iou;
    e.max_det = o.max_det;
    e.agnostic_nms = o.agnostic_nms;
    for (int c : o.classes) {
      if (c < 0 || c >= static_cast<int>(names.size()))
        throw UserError("PredictOptions::classes: class " + std::to_string(c) + " is not in the model (" +
                        std::to_string(names.size()) + " classes)");
      e.classes.push_back(c);
    }
    e.retina_masks = o.retina_masks;
    e.amp = o.half;
    e.nms = nms;
    return e;
  }

  std::vector<Result> predict(const std::vector<data::Image>& images, const PredictOptions& o) {
    const auto e = engine_options(o);
    // An eager model runs with this call's precision; a compiled package with the one it was built with.
    std::vector<engine::Prediction> predictions;
    if (loaded.model) {
      predictions = engine::predict_images(eager_network(e.amp, e.nms), images, e);
    } else {
      predictions = engine::predict_images(*loaded.network, images, e);
    }
    std::vector<Result> results;
    results.reserve(predictions.size());
    for (const auto& p : predictions) results.push_back(to_result(p, names));
    return results;
  }

  void draw(const data::Image& image, const Result& r, const std::string& out_path, const DrawOptions& o) const {
    if (!plot::available()) throw UserError(out_path + ": cannot draw: lucid was built without cairo");
    if (r.width != image.width || r.height != image.height)
      throw UserError(out_path + ": the result is of a " + std::to_string(r.width) + "x" + std::to_string(r.height) +
                      " image, the image is " + std::to_string(image.width) + "x" + std::to_string(image.height));
    const auto n = static_cast<int64_t>(r.detections.size());
    auto boxes = torch::empty({n, 4}, torch::kFloat32);
    auto conf = torch::empty({n}, torch::kFloat32);
    auto cls = torch::empty({n}, torch::kInt64);
    std::vector<structures::MaskWindow> windows;
    for (int64_t i = 0; i < n; ++i) {
      const auto& d = r.detections[static_cast<size_t>(i)];
      boxes[i] = torch::tensor({d.x1, d.y1, d.x2, d.y2});
      conf[i] = d.score;
      cls[i] = d.class_id;
      if (d.class_id < 0 || d.class_id >= static_cast<int>(names.size()))
        throw UserError(out_path + ": detection " + std::to_string(i) + " has class " + std::to_string(d.class_id) +
                        ", not in the model");
      structures::MaskWindow w;
      if (!d.mask.pixels.empty()) {
        if (d.mask.pixels.size() != size_t(d.mask.width) * d.mask.height || d.mask.x0 < 0 || d.mask.y0 < 0 ||
            d.mask.x0 + d.mask.width > image.width || d.mask.y0 + d.mask.height > image.height)
          throw UserError(out_path + ": detection " + std::to_string(i) + "'s mask does not fit the image");
        w.x0 = d.mask.x0;
        w.y0 = d.mask.y0;
        w.pixels =
            torch::from_blob(const_cast<uint8_t*>(d.mask.pixels.data()), {d.mask.height, d.mask.width}, torch::kUInt8);
      }
      windows.push_back(std::move(w));
    }
    plot::Canvas canvas(image);
    const auto style = plot::prediction_style(image.height, image.width, o.line_width, o.labels);
    plot::Instances inst{boxes, cls, conf, torch::Tensor(), 1.0, std::move(windows)};
    plot::draw_instances(canvas, inst, names, 0, 0, 1.0, style);
    canvas.save(out_path);
  }
};

Model::Model(const std::string& weights, const std::string& device, std::optional<bool> nms)
    : impl_(std::make_unique<Impl>()) {
  impl_->device = util::parse_device(device);
  impl_->nms = nms;
  impl_->loaded = engine::load_network("weights", weights, impl_->device, /*amp=*/true, nms);
  impl_->names = impl_->loaded.names;  // the file's, else "class<i>"
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

const std::vector<std::string>& Model::names() const { return impl_->names; }
int Model::trained_imgsz() const { return static_cast<int>(impl_->loaded.imgsz); }
std::string Model::device() const { return impl_->device.str(); }

Result Model::predict(const std::string& image_path, const PredictOptions& options) {
  return std::move(impl_->predict({data::decode_image(image_path)}, options)[0]);
}

Result Model::predict(const ImageView& image, const PredictOptions& options) {
  return std::move(impl_->predict({copy_image(image)}, options)[0]);
}

std::vector<Result> Model::predict_batch(const std::vector<ImageView>& images, const PredictOptions& options) {
  std::vector<data::Image> copies;
  copies.reserve(images.size());
  for (const auto& v : images) copies.push_back(copy_image(v));
  return impl_->predict(copies, options);
}

std::vector<Result> Model::predict_batch(const std::vector<std::string>& image_paths, const PredictOptions& options) {
  std::vector<data::Image> images;
  images.reserve(image_paths.size());
  for (const auto& p : image_paths) images.push_back(data::decode_image(p));
  return impl_->predict(images, options);
}

void Model::draw(const std::string& image_path, const Result& result, const std::string& out_path,
                 const DrawOptions& options) const {
  impl_->draw(data::decode_image(image_path), result, out_path, options);
}

void Model::draw(const ImageView& image, const Result& result, const std::string& out_path,
                 const DrawOptions& options) const {
  impl_->draw(copy_image(image), result, out_path, options);
}

std::string version() { return LUCID_VERSION; }

}  // namespace lucid
