#include "lucid/inference/postprocess.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lucid/model/model.h"

namespace lucid::engine {

namespace F = torch::nn::functional;

namespace {

// FP32 mask pixels a chunk of detections may hold at once.
constexpr int64_t kMaskChunkPixels = int64_t(1) << 24;

// Python's round(): to nearest, ties to even.
int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

Tensor empty_rows(int64_t width, const torch::Device& device) {
  return torch::zeros({0, width}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
}

Tensor keep_classes(const Tensor& rows, const std::vector<int64_t>& classes) {
  if (classes.empty() || rows.size(0) == 0) return rows;
  std::vector<float> c(classes.begin(), classes.end());
  auto allowed = torch::tensor(c, rows.options());
  auto ok = (rows.narrow(1, 5, 1) == allowed.unsqueeze(0)).any(1);
  return rows.index({ok});
}

// Bilinear resize of (N, h, w) float maps to (N, H, W); N may be 0.
Tensor resize_bilinear(const Tensor& maps, int64_t h, int64_t w) {
  if (maps.size(0) == 0) return torch::zeros({0, h, w}, maps.options().dtype(torch::kFloat32));
  return F::interpolate(
             maps.to(torch::kFloat32).unsqueeze(0),
             F::InterpolateFuncOptions().size(std::vector<int64_t>{h, w}).mode(torch::kBilinear).align_corners(false))
      .squeeze(0);
}

// (n, Hm, Wm) FP32 mask logits: each detection's coefficients times the prototypes (c, Hm, Wm).
Tensor mask_logits(const Tensor& protos, const Tensor& coefs) {
  const int64_t c = protos.size(0), mh = protos.size(1), mw = protos.size(2);
  return coefs.to(torch::kFloat32).matmul(protos.to(torch::kFloat32).view({c, -1})).view({-1, mh, mw});
}

}  // namespace

Tensor xywh2xyxy(const Tensor& x) {
  auto xy = x.narrow(-1, 0, 2);
  auto wh = x.narrow(-1, 2, 2) / 2;
  return torch::cat({xy - wh, xy + wh}, -1);
}

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold, int64_t max_keep) {
  const auto device = boxes.device();
  const int64_t n = boxes.size(0);
  auto long_opts = torch::TensorOptions().dtype(torch::kInt64).device(device);
  if (n == 0) return torch::empty({0}, long_opts);
  auto order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  auto b = boxes.to(torch::kFloat32).index_select(0, order).contiguous();
  auto x1 = b.select(1, 0), y1 = b.select(1, 1), x2 = b.select(1, 2), y2 = b.select(1, 3);
  auto area = (x2 - x1) * (y2 - y1);
  // torchvision compares the FP32 IoU with the double threshold: the same test in FP32.
  const float t = static_cast<float>(iou_threshold);
  const bool inclusive = static_cast<double>(t) > iou_threshold;

  // Rows of the suppression matrix in chunks (bounded memory), packed to bits on the device and
  // read back; the greedy pass runs on the host and stops after max_keep kept boxes.
  const int64_t budget = device.is_cuda() ? int64_t{1} << 25 : int64_t{1} << 22;  // IoU elements per chunk
  const int64_t chunk = std::clamp<int64_t>(budget / n, std::min<int64_t>(64, n), n);
  auto bit_weights =
      torch::tensor({1, 2, 4, 8, 16, 32, 64, 128}, torch::TensorOptions().dtype(torch::kUInt8)).to(device);
  std::vector<uint8_t> removed(n, 0);
  std::vector<int64_t> keep;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t rows = std::min(chunk, n - start);
    if (std::all_of(removed.begin() + start, removed.begin() + start + rows, [](uint8_t r) { return r != 0; }))
      continue;
    const int64_t cols = n - start;
    auto r = b.narrow(0, start, rows), c = b.narrow(0, start, cols);
    auto xx1 = torch::max(r.select(1, 0).unsqueeze(1), c.select(1, 0).unsqueeze(0));
    auto yy1 = torch::max(r.select(1, 1).unsqueeze(1), c.select(1, 1).unsqueeze(0));
    auto xx2 = torch::min(r.select(1, 2).unsqueeze(1), c.select(1, 2).unsqueeze(0));
    auto yy2 = torch::min(r.select(1, 3).unsqueeze(1), c.select(1, 3).unsqueeze(0));
    auto inter = (xx2 - xx1).clamp_min(0) * (yy2 - yy1).clamp_min(0);
    auto iou = inter / (area.narrow(0, start, rows).unsqueeze(1) + area.narrow(0, start, cols).unsqueeze(0) - inter);
    auto sup = inclusive ? iou >= t : iou > t;
    const int64_t bytes = (cols + 7) / 8;
    if (bytes * 8 != cols) sup = F::pad(sup.to(torch::kUInt8), F::PadFuncOptions({0, bytes * 8 - cols}));
    auto packed = (sup.to(torch::kUInt8).view({rows, bytes, 8}) * bit_weights).sum(-1, false, torch::kUInt8);
    packed = packed.to(torch::kCPU).contiguous();
    const uint8_t* bits = packed.data_ptr<uint8_t>();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t gi = start + i;
      if (removed[gi]) continue;
      keep.push_back(gi);
      if (max_keep > 0 && static_cast<int64_t>(keep.size()) >= max_keep) goto done;
      const uint8_t* row = bits + i * bytes;
      for (int64_t k = (i + 1) / 8; k < bytes; ++k) {
        uint8_t v = row[k];
        while (v) {
          const int bit = __builtin_ctz(v);
          v &= static_cast<uint8_t>(v - 1);
          const int64_t j = k * 8 + bit;  // column relative to start
          if (j > i) removed[start + j] = 1;
        }
      }
    }
  }
done:
  auto kept = torch::tensor(keep, torch::TensorOptions().dtype(torch::kInt64)).to(device);
  return order.index_select(0, kept);
}

std::vector<Tensor> non_max_suppression(const Tensor& prediction, const NmsOptions& o) {
  TORCH_CHECK(prediction.dim() == 3, "non_max_suppression: prediction must be (B, 4 + nc + extra, A)");
  const int64_t bs = prediction.size(0), channels = prediction.size(1);
  const int64_t nc = o.nc > 0 ? o.nc : channels - 4;
  const int64_t extra = channels - 4 - nc;
  TORCH_CHECK(extra >= 0, "non_max_suppression: ", channels, " channels cannot hold 4 + ", nc, " classes");
  const bool multi = o.multi_label && nc > 1;
  auto p = prediction.to(torch::kFloat32).transpose(1, 2);  // (B, A, C)
  auto candidates = p.narrow(2, 4, nc).amax(2) > o.conf;    // (B, A)
  std::vector<Tensor> out;
  out.reserve(bs);
  for (int64_t bi = 0; bi < bs; ++bi) {
    auto x = p[bi].index({candidates[bi]});
    if (x.size(0) == 0) {
      out.push_back(empty_rows(6 + extra, prediction.device()));
      continue;
    }
    auto box = o.xywh ? xywh2xyxy(x.narrow(1, 0, 4)) : x.narrow(1, 0, 4);
    auto cls = x.narrow(1, 4, nc);
    auto ex = x.narrow(1, 4 + nc, extra);
    Tensor rows;
    if (multi) {
      auto nz = (cls > o.conf).nonzero();  // (m, 2), row-major: box, then class
      auto i = nz.select(1, 0), j = nz.select(1, 1);
      rows = torch::cat({box.index_select(0, i), cls.index({i, j}).unsqueeze(1), j.to(torch::kFloat32).unsqueeze(1),
                         ex.index_select(0, i)},
                        1);
    } else {
      auto [c, j] = cls.max(1, true);
      rows = torch::cat({box, c, j.to(torch::kFloat32), ex}, 1).index({c.view(-1) > o.conf});
    }
    rows = keep_classes(rows, o.classes);
    const int64_t n = rows.size(0);
    if (n == 0) {
      out.push_back(empty_rows(6 + extra, prediction.device()));
      continue;
    }
    if (n > o.max_nms) {
      auto order = std::get<1>(rows.select(1, 4).sort(/*stable=*/true, 0, /*descending=*/true));
      rows = rows.index_select(0, order.narrow(0, 0, o.max_nms));
    }
    auto offset = rows.narrow(1, 5, 1) * (o.agnostic ? 0.0 : o.max_wh);
    // At most every candidate is kept: a max_det beyond them (max_det=1000000000) changes nothing.
    auto keep = nms(rows.narrow(1, 0, 4) + offset, rows.select(1, 4), o.iou, std::min(o.max_det, rows.size(0)));
    out.push_back(rows.index_select(0, keep));
  }
  return out;
}

std::vector<Tensor> select_end2end(const Tensor& rows, double conf, int64_t max_det,
                                   const std::vector<int64_t>& classes) {
  TORCH_CHECK(rows.dim() == 3 && rows.size(2) >= 6, "select_end2end: rows must be (B, k, 6 + extra)");
  std::vector<Tensor> out;
  auto r = rows.to(torch::kFloat32);
  for (int64_t bi = 0; bi < r.size(0); ++bi) {
    auto x = r[bi];
    auto keep = x.select(1, 4) > conf;
    if (!classes.empty()) {
      std::vector<float> c(classes.begin(), classes.end());
      auto allowed = torch::tensor(c, x.options());
      keep = keep & (x.narrow(1, 5, 1) == allowed.unsqueeze(0)).any(1);
    }
    auto idx = keep.nonzero().view(-1);
    if (idx.size(0) > max_det) idx = idx.narrow(0, 0, max_det);
    out.push_back(x.index_select(0, idx));
  }
  return out;
}

bool uses_one_to_one(bool has_one_to_one, const std::optional<bool>& nms) {
  return has_one_to_one && nms.has_value() && !*nms;
}

Tensor one_to_many_dense(const model::SegmentationModelImpl& model, const model::HeadOutputs& out) {
  model::HeadOutputs o2m = out;
  o2m.one2one.reset();
  auto dense = model.head()->decode_dense(o2m, model.strides());
  if (!model.end2end()) return dense;
  // An end-to-end head decodes corners; the reference's decode for NMS takes centre and size from
  // the same corners before the stride, a power of two, scales them, which is the same in floats.
  auto x1y1 = dense.narrow(1, 0, 2), x2y2 = dense.narrow(1, 2, 2);
  return torch::cat({(x1y1 + x2y2) / 2, x2y2 - x1y1, dense.narrow(1, 4, dense.size(1) - 4)}, 1);
}

Tensor candidates(const model::SegmentationModelImpl& model, const model::HeadOutputs& out, const NmsOptions& options,
                  bool one_to_one) {
  if (!one_to_one) return one_to_many_dense(model, out);
  TORCH_CHECK(model.end2end(), "postprocess: the one-to-one head of a model without one");
  return model.decode(out, options.max_det, options.agnostic);
}

std::vector<Tensor> detections(const Tensor& candidates, NmsOptions options, bool one_to_one, int64_t nc) {
  if (one_to_one) return select_end2end(candidates, options.conf, options.max_det, options.classes);
  options.nc = nc;
  options.xywh = true;
  return non_max_suppression(candidates, options);
}

std::vector<Tensor> postprocess(const model::SegmentationModelImpl& model, const model::HeadOutputs& out,
                                NmsOptions options, bool one_to_one) {
  return detections(candidates(model, out, options, one_to_one), options, one_to_one, model.nc());
}

void require_finite_candidates(const Tensor& candidates, bool end2end) {
  // A candidate is a row of end-to-end rows (B, K, 6 + nm), else a column of (B, 4 + nc + nm, A).
  const auto finite = torch::isfinite(candidates).all(end2end ? -1 : 1);
  if (candidates.numel() > 0 && !finite.any().item<bool>()) throw NonFiniteOutputs();
}

Tensor crop_mask(Tensor masks, const Tensor& boxes) {
  const int64_t h = masks.size(1), w = masks.size(2);
  auto b = boxes.to(masks.device()).unsqueeze(2);                                                       // (N, 4, 1)
  auto x1 = b.narrow(1, 0, 1), y1 = b.narrow(1, 1, 1), x2 = b.narrow(1, 2, 1), y2 = b.narrow(1, 3, 1);  // (N,1,1)
  auto opts = torch::TensorOptions().dtype(b.scalar_type()).device(masks.device());
  auto cols = torch::arange(w, opts).view({1, 1, w});
  auto rows = torch::arange(h, opts).view({1, h, 1});
  masks.mul_((cols >= x1).logical_and(cols < x2));
  masks.mul_((rows >= y1).logical_and(rows < y2));
  return masks;
}

Tensor process_mask(const Tensor& protos, const Tensor& coefs, const Tensor& boxes, std::array<int64_t, 2> shape) {
  const int64_t mh = protos.size(1), mw = protos.size(2), n = coefs.size(0);
  auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(coefs.device());
  if (n == 0) return torch::zeros({0, mh, mw}, u8);
  const double wr = static_cast<double>(mw) / shape[1], hr = static_cast<double>(mh) / shape[0];
  auto ratios = torch::tensor({wr, hr, wr, hr}, torch::TensorOptions().dtype(torch::kFloat32)).to(boxes.device());
  auto scaled = boxes.to(torch::kFloat32) * ratios.unsqueeze(0);
  // The float logits a chunk of detections at a time (validation keeps up to max_nms of them per
  // image): memory follows the binary masks, not detections x prototype planes in FP32.
  const int64_t step = std::max<int64_t>(1, kMaskChunkPixels / std::max<int64_t>(mh * mw, 1));
  if (n <= step) return crop_mask(mask_logits(protos, coefs).gt(0.0).to(torch::kUInt8), scaled);
  auto out = torch::empty({n, mh, mw}, u8);
  for (int64_t i = 0; i < n; i += step) {
    const int64_t k = std::min(step, n - i);
    out.narrow(0, i, k).copy_(
        crop_mask(mask_logits(protos, coefs.narrow(0, i, k)).gt(0.0).to(torch::kUInt8), scaled.narrow(0, i, k)));
  }
  return out;
}

Tensor process_mask_upsampled(const Tensor& protos, const Tensor& coefs, const Tensor& boxes,
                              std::array<int64_t, 2> shape) {
  auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(coefs.device());
  if (coefs.size(0) == 0) return torch::zeros({0, shape[0], shape[1]}, u8);
  auto logits = mask_logits(protos, coefs);
  return crop_mask(resize_bilinear(logits, shape[0], shape[1]).gt(0.0).to(torch::kUInt8), boxes.to(torch::kFloat32));
}

Tensor process_mask_native(const Tensor& protos, const Tensor& coefs, const Tensor& boxes,
                           std::array<int64_t, 2> shape) {
  auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(coefs.device());
  if (coefs.size(0) == 0) return torch::zeros({0, shape[0], shape[1]}, u8);
  auto logits = mask_logits(protos, coefs);
  return native_masks(logits, boxes, shape);
}

Tensor native_masks(const Tensor& logits, const Tensor& boxes, std::array<int64_t, 2> shape) {
  const int64_t h = shape[0], w = shape[1], n = logits.size(0), mh = logits.size(1), mw = logits.size(2);
  if (n == 0) return torch::zeros({0, h, w}, logits.options().dtype(torch::kUInt8));
  // The input (4x the prototypes) holds the target letterboxed with padding `pad` on some axis;
  // upsampling by f first makes the half padding a whole number of pixels, so the cut is exact.
  const double gain = std::min(4.0 * mh / h, 4.0 * mw / w);
  const int64_t pad =
      (4 * mh - std::max<int64_t>(py_round(h * gain), 1)) | (4 * mw - std::max<int64_t>(py_round(w * gain), 1));
  const int64_t f = 4 / std::gcd<int64_t>(4, pad | (pad / 2));
  const structures::RatioPad lb = fitted_letterbox({f * mh, f * mw}, shape);
  const int64_t step = std::max<int64_t>(1, 16'000'000 / (h * w + f * f * mh * mw));
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < n; i += step) {
    auto chunk = logits.narrow(0, i, std::min(step, n - i)).to(torch::kFloat32);
    if (f > 1) chunk = resize_bilinear(chunk, f * mh, f * mw);
    parts.push_back(scale_masks(chunk, lb, shape).gt(0.0).to(torch::kUInt8));
  }
  return crop_mask(parts.size() == 1 ? parts[0] : torch::cat(parts), boxes.to(torch::kFloat32));
}

structures::RatioPad fitted_letterbox(std::array<int64_t, 2> input, std::array<int64_t, 2> orig) {
  const double gain = std::min(static_cast<double>(input[0]) / orig[0], static_cast<double>(input[1]) / orig[1]);
  const int64_t new_h = std::max<int64_t>(py_round(orig[0] * gain), 1),
                new_w = std::max<int64_t>(py_round(orig[1] * gain), 1);
  structures::RatioPad lb;
  lb.gain_h = static_cast<double>(new_h) / orig[0];
  lb.gain_w = static_cast<double>(new_w) / orig[1];
  lb.pad_w = static_cast<double>(py_round(static_cast<double>(input[1] - new_w) / 2 - 0.1));
  lb.pad_h = static_cast<double>(py_round(static_cast<double>(input[0] - new_h) / 2 - 0.1));
  return lb;
}

Tensor scale_boxes(const Tensor& boxes, const structures::RatioPad& lb, std::array<int64_t, 2> orig) {
  // Column by column with scalars, as the reference's in-place updates.
  auto b = boxes.to(torch::kFloat32).clone();
  for (int64_t k = 0; k < 4; ++k) {
    auto col = b.select(-1, k);
    col.sub_(k % 2 == 0 ? lb.pad_w : lb.pad_h);
    col.div_(k % 2 == 0 ? lb.gain_w : lb.gain_h);
  }
  for (int64_t k = 0; k < 4; ++k) b.select(-1, k).clamp_(0, static_cast<double>(orig[k % 2 == 0 ? 1 : 0]));
  return b;
}

Tensor scale_masks(const Tensor& masks, const structures::RatioPad& lb, std::array<int64_t, 2> orig) {
  const int64_t h = masks.size(1), w = masks.size(2);
  if (h == orig[0] && w == orig[1]) return masks.to(torch::kFloat32);
  const int64_t top = py_round(lb.pad_h - 0.1), left = py_round(lb.pad_w - 0.1);
  const int64_t bottom = top + std::max<int64_t>(py_round(orig[0] * lb.gain_h), 1);
  const int64_t right = left + std::max<int64_t>(py_round(orig[1] * lb.gain_w), 1);
  return resize_bilinear(masks.slice(1, top, bottom).slice(2, left, right), orig[0], orig[1]);
}

}  // namespace lucid::engine
