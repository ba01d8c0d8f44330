#include "lucid/evaluate/validator.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "lucid/metrics/rle.h"
#include "lucid/model/model.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/printable.h"
#include "lucid/util/progress.h"

namespace lucid::engine {

namespace F = torch::nn::functional;

namespace {

using Clock = std::chrono::steady_clock;

class TrainingFlag {
 public:
  explicit TrainingFlag(torch::nn::Module& m) : m_(m), was_(m.is_training()) { m_.eval(); }
  ~TrainingFlag() { m_.train(was_); }

 private:
  torch::nn::Module& m_;
  bool was_;
};

model::BranchOutputs to_fp32(const model::BranchOutputs& b) {
  auto f = [](const Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  return {f(b.boxes), f(b.scores), f(b.mask_coefficient), f(b.proto), f(b.semantic)};
}

model::HeadOutputs to_fp32(const model::HeadOutputs& out) {
  model::HeadOutputs r;
  r.one2many = to_fp32(out.one2many);
  if (out.one2one) r.one2one = to_fp32(*out.one2one);
  for (const auto& f : out.feats) r.feats.push_back(f);  // only their shapes are used by decoding
  return r;
}

double round_to(double v, int digits) {
  const double s = std::pow(10.0, digits);
  return std::nearbyint(v * s) / s;
}

nlohmann::json image_id_of(const std::string& file) {
  const auto stem = std::filesystem::path(file).stem().string();
  const bool numeric =
      !stem.empty() && std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (numeric && stem.size() < 19) return std::stoll(stem);
  return stem;
}

std::string cformat(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string row(const std::string& name, int64_t images, int64_t instances, const std::array<double, 8>& v) {
  char buf[64];
  std::string s;
  std::snprintf(buf, sizeof buf, "%22s%11lld%11lld", name.c_str(), static_cast<long long>(images),
                static_cast<long long>(instances));
  s += buf;
  for (double x : v) s += cformat("%11.3g", x);
  return s;
}

// A batch's ground truth: per image the count and first row of its instances (host), the classes,
// the boxes and masks (device, for IoUs).
struct BatchTruth {
  std::vector<int64_t> counts, first;
  Tensor cls, boxes, masks;
};

BatchTruth batch_truth(const ValBatch& batch, const torch::Device& device) {
  const int64_t bs = batch.images.size(0);
  BatchTruth t;
  auto bidx = batch.targets.batch_idx.defined() ? batch.targets.batch_idx.reshape({-1}).to(torch::kCPU, torch::kInt64)
                                                : torch::zeros({0}, torch::kInt64);
  t.counts.assign(static_cast<size_t>(bs), 0);
  t.first.assign(static_cast<size_t>(bs), 0);
  auto a = bidx.accessor<int64_t, 1>();
  for (int64_t i = 0; i < a.size(0); ++i) {
    TORCH_CHECK(a[i] >= 0 && a[i] < bs, "validation targets: batch_idx out of range");
    ++t.counts[a[i]];
  }
  for (int64_t i = 1; i < bs; ++i) t.first[i] = t.first[i - 1] + t.counts[i - 1];
  t.cls = bidx.numel() == 0 ? torch::zeros({0}, torch::kFloat32) : batch.targets.cls.reshape({-1}).to(torch::kFloat32);
  t.boxes = bidx.numel() ? batch.targets.bboxes.to(device, torch::kFloat32).reshape({-1, 4})
                         : torch::zeros({0, 4}, torch::TensorOptions().device(device));
  t.masks = bidx.numel() && batch.targets.masks.defined() ? batch.targets.masks.to(device) : Tensor();
  return t;
}

// One image's predictions matched to its nl ground-truth instances (first at `first`) at the ten IoU
// thresholds: (box hits, mask hits). gt_boxes: xyxy in input pixels; the masks compared at (mh, mw).
std::pair<Tensor, Tensor> match_image(const Tensor& pred_cls, const Tensor& pred_boxes, const Tensor& pred_masks,
                                      const Tensor& cls, const Tensor& gt_boxes, const BatchTruth& truth, int64_t si,
                                      bool overlap_mask, int64_t mh, int64_t mw) {
  const int64_t nl = truth.counts[si];
  if (nl == 0 || pred_cls.size(0) == 0) {
    auto none = torch::zeros({pred_cls.size(0), metrics::kIouThresholds}, torch::kBool);
    return {none, none};
  }
  auto tp = metrics::match_predictions(pred_cls, cls, metrics::box_iou(gt_boxes, pred_boxes));
  Tensor gm;
  if (overlap_mask) {
    auto index = torch::arange(1, nl + 1, torch::TensorOptions().device(truth.masks.device())).view({nl, 1, 1});
    gm = (truth.masks[si] == index).to(torch::kFloat32);
  } else {
    gm = truth.masks.narrow(0, truth.first[si], nl).to(torch::kFloat32);
  }
  if (gm.size(1) != mh || gm.size(2) != mw)
    gm = F::interpolate(
             gm.unsqueeze(0),
             F::InterpolateFuncOptions().size(std::vector<int64_t>{mh, mw}).mode(torch::kBilinear).align_corners(false))
             .squeeze(0)
             .gt(0.5)
             .to(torch::kFloat32);
  return {tp, metrics::match_predictions(pred_cls, cls, metrics::mask_iou(gm.flatten(1), pred_masks.flatten(1)))};
}

// save_json: one image's detections as COCO results (boxes and masks in the original image).
void add_coco_results(nlohmann::json& jdict, const ValImage& info, const Tensor& pred, const Tensor& pred_cls,
                      const Tensor& pred_boxes, const Tensor& pred_masks, const std::vector<int64_t>& class_map) {
  const std::array<int64_t, 2> orig{info.orig_h, info.orig_w};
  auto boxes = scale_boxes(pred_boxes, info.letterbox, orig);
  auto xywh = torch::cat(
      {(boxes.narrow(1, 0, 2) + boxes.narrow(1, 2, 2)) / 2, boxes.narrow(1, 2, 2) - boxes.narrow(1, 0, 2)}, 1);
  auto tl = torch::cat({xywh.narrow(1, 0, 2) - xywh.narrow(1, 2, 2) / 2, xywh.narrow(1, 2, 2)}, 1)
                .to(torch::kCPU, torch::kFloat32)
                .contiguous();
  auto masks = scale_masks(pred_masks, info.letterbox, orig).to(torch::kUInt8).to(torch::kCPU).contiguous();
  auto conf = pred.select(1, 4).to(torch::kCPU, torch::kFloat32).contiguous();
  auto pc = pred_cls.to(torch::kCPU, torch::kFloat32).contiguous();
  const nlohmann::json id = info.image_id >= 0 ? nlohmann::json(info.image_id) : image_id_of(info.file);
  const auto name = std::filesystem::path(info.file).filename().string();
  const uint32_t h = static_cast<uint32_t>(masks.size(1)), w = static_cast<uint32_t>(masks.size(2));
  auto tla = tl.accessor<float, 2>();
  auto ca = conf.accessor<float, 1>();
  auto pca = pc.accessor<float, 1>();
  for (int64_t k = 0; k < pred.size(0); ++k) {
    const auto c = static_cast<int64_t>(pca[k]);
    const int64_t cat = c >= 0 && c < static_cast<int64_t>(class_map.size()) ? class_map[c] : c + 1;
    auto rle = metrics::rle_encode(masks[k].data_ptr<uint8_t>(), h, w);
    jdict.push_back(
        {{"image_id", id},
         {"file_name", name},
         {"category_id", cat},
         {"bbox", {round_to(tla[k][0], 3), round_to(tla[k][1], 3), round_to(tla[k][2], 3), round_to(tla[k][3], 3)}},
         {"score", round_to(ca[k], 5)},
         {"segmentation", {{"size", {h, w}}, {"counts", metrics::rle_to_string(rle)}}}});
  }
}

NmsOptions nms_options(const ValidatorOptions& o) {
  NmsOptions nms;
  nms.conf = o.conf;
  nms.iou = o.iou;
  nms.max_det = o.max_det;
  nms.multi_label = true;
  nms.agnostic = o.single_cls || o.agnostic_nms;
  return nms;
}

// The batch's images on the device as the network's input: /255 in FP32, channels_last on CUDA.
Tensor network_input(const ValBatch& batch, const torch::Device& device) {
  const int64_t bs = batch.images.size(0);
  TORCH_CHECK(batch.images.dim() == 4 && batch.images.size(1) == 3, "validation images must be (B, 3, H, W)");
  if (static_cast<int64_t>(batch.info.size()) != bs)
    throw UserError("validation batch: " + std::to_string(batch.info.size()) + " image records for " +
                    std::to_string(bs) + " images");
  auto x = batch.images.to(device, /*non_blocking=*/true).to(torch::kFloat32).div_(255);
  if (device.is_cuda()) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  return x;
}

}  // namespace

// One validation pass's running totals: the statistics the metrics come from, the confusion matrix,
// the loss sums, the COCO results and the seconds of each phase.
struct Validator::Pass {
  metrics::SegmentationStats stats;
  ValResults res;
  Tensor loss_sum;
  nlohmann::json jdict = nlohmann::json::array();
  double t_pre = 0, t_inf = 0, t_loss = 0, t_post = 0;
  Pass(int64_t nc, double conf) : stats(nc) { res.confusion = metrics::ConfusionMatrix(nc, conf); }
};

// One batch's detections scored image by image against the ground truth: masks (at 1/4 of the
// input, or at the input's resolution for a results file), the confusion matrix, the matches and
// statistics, the callbacks and the COCO results.
void Validator::score_batch(const ValidatorOptions& o, Pass& pass, const ValBatch& batch,
                            const std::vector<Tensor>& dets, const Tensor& proto, const torch::Device& device) {
  const bool native = !o.save_json.empty();
  const int64_t bs = batch.images.size(0), H = batch.images.size(2), W = batch.images.size(3);
  const auto truth = batch_truth(batch, device);
  const std::array<int64_t, 2> shape{H, W};
  const int64_t mh = native ? H : H / 4, mw = native ? W : W / 4;
  auto scale =
      torch::tensor({static_cast<float>(W), static_cast<float>(H), static_cast<float>(W), static_cast<float>(H)})
          .to(device);
  std::vector<Tensor> batch_masks;
  for (int64_t si = 0; si < bs; ++si) {
    auto pred = dets[si];
    const int64_t nl = truth.counts[si];
    auto cls = truth.cls.narrow(0, truth.first[si], nl);
    auto pred_cls = pred.select(1, 5);
    if (o.single_cls) pred_cls = pred_cls * 0;
    auto pred_boxes = pred.narrow(1, 0, 4);
    auto coefs = pred.narrow(1, 6, pred.size(1) - 6);
    auto pred_masks = native ? process_mask_native(proto[si], coefs, pred_boxes, shape)
                             : process_mask(proto[si], coefs, pred_boxes, shape);
    auto gt_boxes = nl ? xywh2xyxy(truth.boxes.narrow(0, truth.first[si], nl)) * scale
                       : torch::zeros({0, 4}, torch::TensorOptions().device(device));
    pass.res.confusion.add_image(pred_boxes, pred.select(1, 4), pred_cls, gt_boxes, cls);
    const auto [tp, tp_m] =
        match_image(pred_cls, pred_boxes, pred_masks, cls, gt_boxes, truth, si, o.overlap_mask, mh, mw);
    pass.stats.add_image(tp, tp_m, pred.select(1, 4), pred_cls, cls);
    if (o.on_image) o.on_image(batch.info[si], pred, pred_masks);
    if (o.on_batch) batch_masks.push_back(pred_masks);
    if (native && pred.size(0))
      add_coco_results(pass.jdict, batch.info[si], pred, pred_cls, pred_boxes, pred_masks, o.class_map);
  }
  if (o.on_batch) o.on_batch(pass.res.batches, batch, dets, batch_masks);
}

Validator::Validator(ValidatorOptions options) : options_(std::move(options)) {}

std::string Validator::header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%22s%11s%11s%11s%11s%11s%11s%11s%11s%11s%11s", "Class", "Images", "Instances",
                "Box(P", "R", "mAP50", "mAP50-95)", "Mask(P", "R", "mAP50", "mAP50-95)");
  return buf;
}

std::string Validator::format_results(const metrics::SegmentationMetrics& m) const {
  std::string s = row("all", m.images, m.instances, metrics::mean_results(m.box, m.mask)) + "\n";
  if (m.instances == 0) s += "WARNING no labels found in segment set, cannot compute metrics without labels\n";
  const int64_t nc = static_cast<int64_t>(m.maps.size());
  if (options_.verbose && nc > 1) {
    for (const auto& c : m.per_class) {
      const std::string name = c.cls >= 0 && c.cls < static_cast<int64_t>(options_.names.size())
                                   ? util::printable(options_.names[c.cls])
                                   : std::to_string(c.cls);
      s += row(name, c.images, c.instances, metrics::mean_results(c.box, c.mask)) + "\n";
    }
  }
  return s;
}

std::string Validator::format_speed(const ValSpeed& sp) const {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "Speed: %.1fms preprocess, %.1fms inference, %.1fms loss, %.1fms postprocess per image", sp.preprocess,
                sp.inference, sp.loss, sp.postprocess);
  return buf;
}

ValResults Validator::run(model::SegmentationModelImpl& model, const torch::Device& device, const ValBatchSource& next,
                          loss::SegmentationLoss* loss, std::ostream* log) {
  const auto& o = options_;
  TrainingFlag eval_mode(model);
  const NmsOptions nms = nms_options(o);
  const bool one_to_one = uses_one_to_one(model.end2end(), o.nms);
  return run_batches(
      device, model.nc(), next,
      [&](const Tensor& x, const ValBatch& batch, Pass& pass, const Tick& tick) {
        model::HeadOutputs raw;
        {
          util::Autocast ac(device.is_cuda() && o.amp);
          raw = model.forward(x);
        }
        tick(pass.t_inf);
        if (loss) {
          auto items = (*loss)(raw, batch.targets).items.detach().to(torch::kFloat64);
          pass.loss_sum = pass.loss_sum.defined() ? pass.loss_sum + items : items;
          tick(pass.t_loss);
        }
        auto out = to_fp32(raw);
        return BatchOutputs{candidates(model, out, nms, one_to_one), out.primary().proto, one_to_one};
      },
      log);
}

ValResults Validator::run(Network& network, const ValBatchSource& next, std::ostream* log) {
  const auto& o = options_;
  return run_batches(
      network.device(), network.nc(), next,
      [&](const Tensor& x, const ValBatch&, Pass& pass, const Tick& tick) {
        auto y = network.run(x, o.max_det, o.single_cls || o.agnostic_nms);
        tick(pass.t_inf);
        return BatchOutputs{y.pred.to(torch::kFloat32), y.proto.to(torch::kFloat32), network.end2end()};
      },
      log);
}

ValResults Validator::run_batches(const torch::Device& device, int64_t nc, const ValBatchSource& next,
                                  const BatchForward& forward, std::ostream* log) {
  const auto& o = options_;
  torch::NoGradGuard no_grad;
  const bool cuda = device.is_cuda();
  if (o.on_event) o.on_event(ValEvent::Start, 0, nullptr);
  std::optional<util::Progress> progress;
  if (log == &std::cout && o.batches > 0)
    progress.emplace(header(), o.batches, util::Progress::Style::kHeaderInline);
  else if (log)
    *log << header() << "\n";

  const NmsOptions nms = nms_options(o);
  Pass pass(nc, o.conf);
  Clock::time_point t0;
  const Tick tick = [&](double& acc) {
    if (o.speed && cuda) torch::cuda::synchronize();
    auto t1 = Clock::now();
    acc += std::chrono::duration<double>(t1 - t0).count();
    t0 = t1;
  };
  ValBatch batch;
  while (next(batch)) {
    if (o.on_event) o.on_event(ValEvent::BatchStart, pass.res.batches, nullptr);
    t0 = Clock::now();
    const auto x = network_input(batch, device);
    tick(pass.t_pre);
    const auto out = forward(x, batch, pass, tick);
    if (o.refuse_non_finite) require_finite_candidates(out.pred, out.one_to_one);
    const auto dets = detections(out.pred, nms, out.one_to_one, nc);
    score_batch(o, pass, batch, dets, out.proto, device);
    tick(pass.t_post);
    if (o.on_event) o.on_event(ValEvent::BatchEnd, pass.res.batches, nullptr);
    ++pass.res.batches;
    if (progress) progress->update(pass.res.batches, "");
  }
  if (progress) progress->finish();
  auto results = finish(pass, log);
  if (o.on_event) o.on_event(ValEvent::End, results.batches, &results);
  return results;
}

ValResults Validator::finish(Pass& pass, std::ostream* log) const {
  const auto& o = options_;
  auto& res = pass.res;
  res.metrics = pass.stats.compute();
  if (pass.loss_sum.defined() && res.batches > 0) {
    auto mean = (pass.loss_sum / static_cast<double>(res.batches)).to(torch::kCPU);
    for (int64_t i = 0; i < mean.numel(); ++i) res.losses.push_back(mean[i].item<double>());
  }
  const double per_image = res.metrics.images > 0 ? 1e3 / static_cast<double>(res.metrics.images) : 0.0;
  res.speed = {pass.t_pre * per_image, pass.t_inf * per_image, pass.t_loss * per_image, pass.t_post * per_image};
  if (log) {
    *log << format_results(res.metrics);
    if (o.speed) *log << format_speed(res.speed) << "\n";
  }
  if (!o.save_json.empty()) {
    util::write_atomically(o.save_json, [&](std::ostream& os) { os << pass.jdict.dump(); });
    if (log) *log << "Saved " << pass.jdict.size() << " results to " << o.save_json << "\n";
  }
  return std::move(res);
}

std::vector<int64_t> coco80_to_coco91() {
  return {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31,
          32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
          60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};
}

}  // namespace lucid::engine
