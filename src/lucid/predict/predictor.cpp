#include "lucid/predict/predictor.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "lucid/data/resize.h"
#include "lucid/inference/network.h"
#include "lucid/model/model.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/memory.h"
#include "lucid/util/parallel.h"

namespace lucid::engine {

PredictLetterbox predict_letterbox(int orig_h, int orig_w, InputSize imgsz, int stride) {
  PredictLetterbox lb;
  lb.ratio = std::min(static_cast<double>(imgsz.h) / orig_h, static_cast<double>(imgsz.w) / orig_w);
  lb.resized_w = std::max(static_cast<int>(std::nearbyint(orig_w * lb.ratio)), 1);
  lb.resized_h = std::max(static_cast<int>(std::nearbyint(orig_h * lb.ratio)), 1);
  // A stride of at least either side leaves the whole remainder: the full imgsz.
  lb.pad_w = static_cast<double>((imgsz.w - lb.resized_w) % stride) / 2;
  lb.pad_h = static_cast<double>((imgsz.h - lb.resized_h) % stride) / 2;
  const int top = static_cast<int>(std::nearbyint(lb.pad_h - 0.1)),
            bottom = static_cast<int>(std::nearbyint(lb.pad_h + 0.1));
  const int left = static_cast<int>(std::nearbyint(lb.pad_w - 0.1)),
            right = static_cast<int>(std::nearbyint(lb.pad_w + 0.1));
  lb.height = lb.resized_h + top + bottom;
  lb.width = lb.resized_w + left + right;
  return lb;
}

namespace {

// Writes the letterbox of one image into dst, (lb.height, lb.width, 3) uint8: bilinear resize to the
// resized size, placed at the rounded padding on 114 grey. Plain loops: this runs on the batch's
// threads, where ATen's own intra-op threads would oversubscribe the CPUs.
void letterbox_into(const data::Image& image, const PredictLetterbox& lb, uint8_t* dst) {
  const int uw = lb.resized_w, uh = lb.resized_h, c = image.channels;
  if (c < 3) throw std::invalid_argument("predict: an image of " + std::to_string(c) + " channels");
  std::vector<uint8_t> resized;
  const uint8_t* src = image.pixels.data();
  if (uw != image.width || uh != image.height) {
    resized.resize(static_cast<size_t>(uh) * uw * c);
    data::resize_linear(src, image.height, image.width, c, resized.data(), uh, uw);
    src = resized.data();
  }
  const int top = static_cast<int>(std::nearbyint(lb.pad_h - 0.1)),
            left = static_cast<int>(std::nearbyint(lb.pad_w - 0.1));
  const size_t row = static_cast<size_t>(lb.width) * 3;
  std::memset(dst, 114, row * static_cast<size_t>(lb.height));
  for (int y = 0; y < uh; ++y) {
    uint8_t* out = dst + static_cast<size_t>(top + y) * row + static_cast<size_t>(left) * 3;
    const uint8_t* in = src + static_cast<size_t>(y) * uw * c;
    if (c == 3) {
      std::memcpy(out, in, static_cast<size_t>(uw) * 3);
    } else {
      for (int x = 0; x < uw; ++x) std::memcpy(out + x * 3, in + static_cast<size_t>(x) * c, 3);
    }
  }
}

// The batch's network input: the letterboxes written on threads into one (B, H, W, 3) buffer,
// pinned when the network is on a GPU so that the upload is one asynchronous copy; the layout
// change and the conversion to floats in 0-1 run on the device.
Tensor batch_input(const Network& network, std::span<const data::Image> images,
                   const std::vector<PredictLetterbox>& lbs) {
  const auto device = network.device();
  const int64_t h = lbs.front().height, w = lbs.front().width, plane = h * w * 3;
  auto batch = torch::empty({static_cast<int64_t>(images.size()), h, w, 3},
                            torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(device.is_cuda()));
  uint8_t* base = batch.data_ptr<uint8_t>();
  util::parallel_for(images.size(), [&](size_t k) { letterbox_into(images[k], lbs[k], base + k * plane); });
  return batch.to(device, /*non_blocking=*/true).permute({0, 3, 1, 2}).to(torch::kFloat32).div_(255);
}

// The predictor's NMS: its options' thresholds, one label per box (the predictor's default).
NmsOptions prediction_nms(const PredictOptions& o) {
  NmsOptions nms;
  nms.conf = o.conf;
  nms.iou = o.iou;
  nms.max_det = o.max_det;
  nms.agnostic = o.agnostic_nms;
  nms.multi_label = false;
  nms.classes = o.classes;
  return nms;
}

// The prediction of one image from its detections `det` (rows of postprocess) and prototypes.
// Its masks are made a chunk of detections at a time (float planes of the input size, or of the
// prototypes with retina_masks), each kept as its window of the image: memory is n windows and one
// chunk of planes, n being at most the network's candidates. Refused before anything is allocated
// when that passes the memory available.
void require_memory_for_masks(int64_t n, int64_t chunk, int64_t plane_pixels, int64_t image_pixels,
                              const PredictOptions& o) {
  const uint64_t need = static_cast<uint64_t>(n) * static_cast<uint64_t>(image_pixels) +
                        static_cast<uint64_t>(std::min(n, chunk)) * static_cast<uint64_t>(plane_pixels) * 8;
  const uint64_t available = util::available_memory_bytes();
  if (need <= available) return;
  char conf[32];
  std::snprintf(conf, sizeof conf, "%g", o.conf);
  throw UserError("predict: the " + std::to_string(n) + " detections kept at conf=" + conf + " max_det=" +
                  std::to_string(o.max_det) + " need up to " + std::to_string(need) + " bytes for their masks, but " +
                  std::to_string(available) + " bytes are available; raise conf= or lower max_det=");
}

Prediction image_prediction(const Tensor& det, const Tensor& proto, const PredictLetterbox& lb, int h0, int w0,
                            const PredictOptions& o) {
  const std::array<int64_t, 2> input{lb.height, lb.width}, orig{h0, w0};
  // The reference maps boxes and masks back without a ratio_pad: the letterbox of the original size
  // in the input's, each side rounded on its own.
  const structures::RatioPad back = fitted_letterbox(input, orig);
  auto boxes_in = det.narrow(1, 0, 4);
  auto coefs = det.narrow(1, 6, det.size(1) - 6);
  auto boxes = scale_boxes(boxes_in, back, orig);
  const int64_t n = det.size(0);
  const int64_t plane = o.retina_masks ? proto.size(1) * proto.size(2) : int64_t(lb.height) * lb.width;
  const int64_t chunk = std::max<int64_t>(1, o.mask_chunk_pixels / std::max<int64_t>({int64_t(h0) * w0, plane, 1}));
  require_memory_for_masks(n, chunk, plane, int64_t(h0) * w0, o);
  // retina_masks: the mask logits at prototype resolution, brought to the original image by
  // native_masks. Otherwise the masks at input resolution, then scaled back as the reference draws
  // them. Every mask is computed on its own, so the chunk size does not change a pixel.
  std::vector<structures::MaskWindow> windows;
  windows.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t k = std::min(chunk, n - i);
    const auto c = coefs.narrow(0, i, k);
    Tensor masks = o.retina_masks
                       ? process_mask_native(proto, c, boxes.narrow(0, i, k), orig)
                       : scale_masks(process_mask_upsampled(proto, c, boxes_in.narrow(0, i, k), input), back, orig)
                             .gt(0.5)
                             .to(torch::kUInt8);
    for (auto& w : structures::mask_windows(masks)) windows.push_back(std::move(w));
  }
  // Detections whose mask is empty are dropped, as in the reference.
  std::vector<int64_t> kept;
  Prediction p;
  p.orig_h = h0;
  p.orig_w = w0;
  for (int64_t i = 0; i < n; ++i)
    if (!windows[static_cast<size_t>(i)].empty()) {
      kept.push_back(i);
      p.masks.push_back(std::move(windows[static_cast<size_t>(i)]));
    }
  auto keep = torch::tensor(kept, torch::kInt64).to(det.device());
  p.boxes = boxes.index_select(0, keep).to(torch::kCPU);
  p.conf = det.select(1, 4).index_select(0, keep).to(torch::kCPU);
  p.cls = det.select(1, 5).index_select(0, keep).to(torch::kCPU, torch::kInt64);
  return p;
}

}  // namespace

// A fixed-input network's pad_multiple is its (square) size, which a rectangular imgsz never is
// (the commands refuse it): the larger side stands for the full imgsz either way.
int batch_pad_multiple(const Network& network, std::span<const data::Image> images, InputSize imgsz) {
  const bool same = std::all_of(images.begin(), images.end(), [&](const data::Image& image) {
    return image.height == images.front().height && image.width == images.front().width;
  });
  return same ? network.pad_multiple(imgsz.max_side()) : imgsz.max_side();
}

std::pair<int, int> batch_input_shape(const Network& network, std::span<const std::pair<int, int>> sizes,
                                      InputSize imgsz) {
  if (sizes.empty()) return {0, 0};
  const bool same = std::all_of(sizes.begin(), sizes.end(), [&](const auto& s) { return s == sizes.front(); });
  const auto lb = predict_letterbox(sizes.front().first, sizes.front().second, imgsz,
                                    same ? network.pad_multiple(imgsz.max_side()) : imgsz.max_side());
  return {lb.height, lb.width};
}

std::vector<Prediction> predict_images(Network& network, std::span<const data::Image> images, const PredictOptions& o,
                                       PredictTimes* times) {
  torch::NoGradGuard no_grad;
  if (images.empty()) return {};
  using Clock = std::chrono::steady_clock;
  auto mark = Clock::now();
  auto lap = [&](double PredictTimes::*stage) {
    if (!times) return;
    const auto now = Clock::now();
    times->*stage += std::chrono::duration<double, std::milli>(now - mark).count();
    mark = now;
  };
  // Every letterbox of the batch has one size (batch_pad_multiple): one forward.
  const int multiple = batch_pad_multiple(network, images, o.imgsz);
  std::vector<PredictLetterbox> lbs;
  lbs.reserve(images.size());
  for (const auto& image : images) lbs.push_back(predict_letterbox(image.height, image.width, o.imgsz, multiple));
  const auto x = batch_input(network, images, lbs);
  lap(&PredictTimes::preprocess);
  const NmsOptions nms = prediction_nms(o);
  const auto out = network.run(x, network_top_k(o), o.agnostic_nms);
  if (times && out.pred.is_cuda()) torch::cuda::synchronize(out.pred.device().index());
  lap(&PredictTimes::inference);
  require_finite_candidates(out.pred, network.end2end());
  const auto dets = network_detections(network, out, nms);
  std::vector<Prediction> predictions;
  predictions.reserve(images.size());
  for (size_t k = 0; k < images.size(); ++k)
    predictions.push_back(
        image_prediction(dets[k], out.proto[static_cast<int64_t>(k)], lbs[k], images[k].height, images[k].width, o));
  lap(&PredictTimes::postprocess);
  return predictions;
}

namespace {

// Network outputs for image 0 with `count` candidates of score (1 + conf) / 2: boxes of 4 pixels on an
// 8-pixel grid (no two overlap), every other candidate scored 0. The layout is the network's:
// end-to-end rows (1, K, 6 + nm) of corners, else columns (1, 4 + nc + nm, A) of centre and size.
Tensor synthetic_candidates(const Network& network, const Tensor& pred, int64_t count, int64_t width,
                            const PredictOptions& o) {
  auto p = pred.narrow(0, 0, 1).clone();
  const float score = static_cast<float>((1 + std::min(o.conf, 1.0)) / 2);
  const int64_t cls = o.classes.empty() ? 0 : o.classes.front();
  const int64_t per_row = std::max<int64_t>(width / 8, 1);
  auto rows = network.end2end() ? p[0] : p[0].transpose(0, 1);  // (candidates, fields), a view
  const int64_t nc = network.end2end() ? 0 : network.nc();
  if (network.end2end())
    rows.select(1, 4).zero_();
  else
    rows.narrow(1, 4, nc).zero_();
  count = std::min(count, rows.size(0));
  for (int64_t j = 0; j < count; ++j) {
    const double x = 8.0 * (j % per_row) + 4, y = 8.0 * (j / per_row) + 4;
    auto r = rows[j];
    if (network.end2end()) {
      r.narrow(0, 0, 4).copy_(torch::tensor({x - 2, y - 2, x + 2, y + 2}, r.options()));
      r[4].fill_(score);
      r[5].fill_(static_cast<double>(cls));
    } else {
      r.narrow(0, 0, 4).copy_(torch::tensor({x, y, 4.0, 4.0}, r.options()));
      r[4 + cls].fill_(score);
    }
  }
  return p;
}

}  // namespace

void warm_postprocess(Network& network, std::span<const data::Image> images, const PredictOptions& o) {
  torch::NoGradGuard no_grad;
  if (images.empty()) return;
  // The batch's own forward (its recording is made): image 0's outputs stand for every image's.
  const int multiple = batch_pad_multiple(network, images, o.imgsz);
  std::vector<PredictLetterbox> lbs;
  for (const auto& image : images) lbs.push_back(predict_letterbox(image.height, image.width, o.imgsz, multiple));
  const auto& lb = lbs.front();
  const auto out = network.run(batch_input(network, images, lbs), network_top_k(o), o.agnostic_nms);
  const NmsOptions nms = prediction_nms(o);
  for (int64_t count : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
    if (count > o.max_det) break;
    const NetworkOutputs synthetic{synthetic_candidates(network, out.pred, count, lb.width, o), out.proto};
    const auto dets = network_detections(network, synthetic, nms);
    image_prediction(dets[0], out.proto[0], lb, images[0].height, images[0].width, o);
  }
}

std::vector<Prediction> predict_images(model::SegmentationModelImpl& model, const torch::Device& device,
                                       std::span<const data::Image> images, const PredictOptions& o) {
  EagerNetwork network(model, device, o.amp, o.nms);
  return predict_images(network, images, o);
}

Prediction predict_image(Network& network, const data::Image& image, const PredictOptions& o) {
  return std::move(predict_images(network, std::span<const data::Image>(&image, 1), o)[0]);
}

Prediction predict_image(model::SegmentationModelImpl& model, const torch::Device& device, const data::Image& image,
                         const PredictOptions& o) {
  EagerNetwork network(model, device, o.amp, o.nms);
  return predict_image(network, image, o);
}

namespace {

// Labels the 8-connected regions of a binary mask 1, 2, ... in raster order of their first pixel
// (top-most, then left-most); returns each region's first pixel and pixel count.
struct Regions {
  std::vector<int> label, start, count;
};

Regions label_regions(const uint8_t* mask, int h, int w) {
  Regions r;
  r.label.assign(static_cast<size_t>(h) * w, 0);
  std::vector<int> stack;
  for (int i = 0; i < h * w; ++i) {
    if (!mask[i] || r.label[i]) continue;
    const int id = static_cast<int>(r.start.size()) + 1;
    int count = 0;
    r.start.push_back(i);
    stack.push_back(i);
    r.label[i] = id;
    while (!stack.empty()) {
      const int p = stack.back();
      stack.pop_back();
      ++count;
      const int py = p / w, px = p % w;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int qy = py + dy, qx = px + dx;
          if (qy < 0 || qy >= h || qx < 0 || qx >= w) continue;
          const int q = qy * w + qx;
          if (mask[q] && !r.label[q]) {
            r.label[q] = id;
            stack.push_back(q);
          }
        }
    }
    r.count.push_back(count);
  }
  return r;
}

// The outer boundary of region `id` from its first pixel: Moore-neighbour following (counter-clockwise
// chain codes 0 = E, 1 = NE, ..., 7 = SE; y grows downwards), stopping when the start pixel is left
// again in the first direction; straight runs reduced to their end points.
std::vector<float> trace_outline(const std::vector<int>& label, int id, int start, int h, int w) {
  static const int DX[8] = {1, 1, 0, -1, -1, -1, 0, 1}, DY[8] = {0, -1, -1, -1, 0, 1, 1, 1};
  auto inside = [&](int x, int y) { return x >= 0 && x < w && y >= 0 && y < h && label[y * w + x] == id; };
  const int sx = start % w, sy = start / w;
  std::vector<std::pair<int, int>> pts{{sx, sy}};
  std::vector<int> dirs;
  int x = sx, y = sy, dir = 7, first_dir = -1;
  for (size_t guard = 0; guard < static_cast<size_t>(4) * h * w + 8; ++guard) {
    const int first = dir % 2 == 0 ? (dir + 7) % 8 : (dir + 6) % 8;
    int found = -1;
    for (int k = 0; k < 8; ++k) {
      const int d = (first + k) % 8;
      if (inside(x + DX[d], y + DY[d])) {
        found = d;
        break;
      }
    }
    if (found < 0) break;  // a single pixel
    if (x == sx && y == sy && first_dir >= 0 && found == first_dir) break;
    if (first_dir < 0) first_dir = found;
    x += DX[found];
    y += DY[found];
    dir = found;
    dirs.push_back(found);
    pts.emplace_back(x, y);
  }
  if (pts.size() > 1) pts.pop_back();  // back at the start
  // Keep the points where the chain direction changes.
  std::vector<float> out;
  const size_t n = pts.size();
  for (size_t i = 0; i < n; ++i) {
    const int in_dir = dirs.empty() ? -1 : dirs[(i + n - 1) % n];
    const int out_dir = dirs.empty() ? -1 : dirs[i % dirs.size()];
    if (n > 2 && in_dir == out_dir) continue;
    out.push_back(static_cast<float>(pts[i].first));
    out.push_back(static_cast<float>(pts[i].second));
  }
  return out;
}

}  // namespace

std::vector<float> mask_outline(const uint8_t* mask, int h, int w) {
  const auto regions = label_regions(mask, h, w);
  if (regions.start.empty()) return {};
  const auto largest = std::max_element(regions.count.begin(), regions.count.end()) - regions.count.begin();
  return trace_outline(regions.label, static_cast<int>(largest) + 1, regions.start[largest], h, w);
}

std::vector<std::vector<float>> mask_contours(const uint8_t* mask, int h, int w) {
  const auto regions = label_regions(mask, h, w);
  // The background 4-connected to the image's edge. A region whose first pixel's left neighbour is
  // other background lies in a hole of another region, which RETR_EXTERNAL leaves out.
  std::vector<uint8_t> outside(static_cast<size_t>(h) * w, 0);
  std::vector<int> stack;
  auto visit = [&](int q) {
    if (!mask[q] && !outside[q]) outside[q] = 1, stack.push_back(q);
  };
  for (int x = 0; x < w; ++x) visit(x), visit((h - 1) * w + x);
  for (int y = 0; y < h; ++y) visit(y * w), visit(y * w + w - 1);
  while (!stack.empty()) {
    const int p = stack.back();
    stack.pop_back();
    const int px = p % w;
    if (px > 0) visit(p - 1);
    if (px + 1 < w) visit(p + 1);
    if (p >= w) visit(p - w);
    if (p + w < h * w) visit(p + w);
  }
  std::vector<std::vector<float>> out;
  for (size_t k = regions.start.size(); k-- > 0;) {  // OpenCV lists the last region found first
    const int s = regions.start[k];
    if (s % w == 0 || outside[s - 1]) out.push_back(trace_outline(regions.label, static_cast<int>(k) + 1, s, h, w));
  }
  return out;
}

}  // namespace lucid::engine
