// Runs our validation pieces for the validation oracle test (tests/oracle/test_val_metrics_oracle.py).
//   val_oracle_tool metrics IN OUT   per image i: gt_boxes.i (L,4 xyxy) gt_cls.i (L) gt_masks.i (L,h,w)
//                                    pred_boxes.i (D,4) pred_conf.i (D) pred_cls.i (D) pred_masks.i (D,h,w);
//                                    nc (1). Writes tp.i, tp_m.i (D,10), box_iou.i, mask_iou.i, results (8),
//                                    fitness, classes, box_ap/mask_ap (C,10), box_p/box_r/mask_p/mask_r (C).
//   val_oracle_tool nms IN OUT       pred.k (B, 4+nc+nm, A); options.k = [conf, iou, max_det, agnostic,
//                                    multi_label, nc, max_nms]. Writes out.k.b (n, 6+nm).
//   val_oracle_tool masks IN OUT     protos.k (nm,mh,mw), coefs.k (N,nm), boxes.k (N,4), shape.k (2),
//                                    orig.k (2), ratio_pad.k (4: gain_h, gain_w, pad_w, pad_h). Writes
//                                    proto.k, native.k (uint8), boxes_scaled.k, masks_scaled.k,
//                                    native_orig.k (process_mask_native at orig from boxes_scaled).
//   val_oracle_tool validate MODEL.yaml NC WEIGHTS BATCHES OUT [--nms None|True|False] [--json PATH]
//                                    runs the Validator (CPU, FP32) over batches img.b, batch_idx.b, cls.b,
//                                    bboxes.b, masks.b (overlap maps), orig.b (B,2), letterbox.b (B,4: gain_h,
//                                    gain_w, pad_w, pad_h); image files are "<1000 + global index>.jpg". Writes
//                                    results (8), fitness, counts (images, instances); prints the table.
#include <iostream>

#include "lucid/config/model_yaml.h"
#include "lucid/config/nms_option.h"
#include "lucid/evaluate/validator.h"
#include "lucid/model/model.h"

#include "lucid/inference/postprocess.h"
#include "lucid/metrics/detection_metrics.h"
#include "lucid/model/safetensors.h"

using namespace lucid;
using torch::Tensor;

namespace {

Tensor vec(const std::vector<double>& v) { return torch::tensor(v, torch::kFloat64); }

Tensor ap_table(const metrics::ClassMetrics& m) {
  auto t = torch::zeros({static_cast<int64_t>(m.size()), metrics::kIouThresholds}, torch::kFloat64);
  for (size_t i = 0; i < m.size(); ++i)
    for (int k = 0; k < metrics::kIouThresholds; ++k) t[i][k] = m.ap[i][k];
  return t;
}

void run_metrics(const std::map<std::string, Tensor>& in, model::NamedTensors& out) {
  const int64_t nc = in.at("nc").item<int64_t>();
  metrics::SegmentationStats stats(nc);
  for (int64_t i = 0; in.count("gt_cls." + std::to_string(i)); ++i) {
    const auto k = std::to_string(i);
    auto gt_boxes = in.at("gt_boxes." + k), gt_cls = in.at("gt_cls." + k), gt_masks = in.at("gt_masks." + k);
    auto boxes = in.at("pred_boxes." + k), conf = in.at("pred_conf." + k), cls = in.at("pred_cls." + k);
    auto masks = in.at("pred_masks." + k);
    Tensor tp, tp_m;
    if (gt_cls.numel() == 0 || cls.numel() == 0) {
      tp = torch::zeros({cls.numel(), metrics::kIouThresholds}, torch::kBool);
      tp_m = tp;
    } else {
      auto bi = metrics::box_iou(gt_boxes, boxes);
      auto mi = metrics::mask_iou(gt_masks.flatten(1), masks.flatten(1));
      out.emplace_back("box_iou." + k, bi);
      out.emplace_back("mask_iou." + k, mi);
      tp = metrics::match_predictions(cls, gt_cls, bi);
      tp_m = metrics::match_predictions(cls, gt_cls, mi);
    }
    out.emplace_back("tp." + k, tp);
    out.emplace_back("tp_m." + k, tp_m);
    stats.add_image(tp, tp_m, conf, cls, gt_cls);
  }
  auto m = stats.compute();
  out.emplace_back("results", vec({m.box.precision, m.box.recall, m.box.map50, m.box.map50_95, m.mask.precision,
                                   m.mask.recall, m.mask.map50, m.mask.map50_95}));
  out.emplace_back("fitness", vec({m.fitness}));
  out.emplace_back("classes", torch::tensor(m.box_detail.classes, torch::kInt64));
  out.emplace_back("box_ap", ap_table(m.box_detail));
  out.emplace_back("mask_ap", ap_table(m.mask_detail));
  out.emplace_back("box_p", vec(m.box_detail.p));
  out.emplace_back("box_r", vec(m.box_detail.r));
  out.emplace_back("mask_p", vec(m.mask_detail.p));
  out.emplace_back("mask_r", vec(m.mask_detail.r));
  out.emplace_back("maps", vec(m.maps));
}

void run_nms(const std::map<std::string, Tensor>& in, model::NamedTensors& out) {
  for (int64_t k = 0; in.count("pred." + std::to_string(k)); ++k) {
    const auto key = std::to_string(k);
    auto opt = in.at("options." + key).to(torch::kFloat64);
    engine::NmsOptions o;
    o.conf = opt[0].item<double>();
    o.iou = opt[1].item<double>();
    o.max_det = static_cast<int64_t>(opt[2].item<double>());
    o.agnostic = opt[3].item<double>() != 0;
    o.multi_label = opt[4].item<double>() != 0;
    o.nc = static_cast<int64_t>(opt[5].item<double>());
    o.max_nms = static_cast<int64_t>(opt[6].item<double>());
    auto dets = engine::non_max_suppression(in.at("pred." + key), o);
    for (size_t b = 0; b < dets.size(); ++b) out.emplace_back("out." + key + "." + std::to_string(b), dets[b]);
  }
}

void run_masks(const std::map<std::string, Tensor>& in, model::NamedTensors& out) {
  for (int64_t k = 0; in.count("protos." + std::to_string(k)); ++k) {
    const auto key = std::to_string(k);
    auto protos = in.at("protos." + key), coefs = in.at("coefs." + key), boxes = in.at("boxes." + key);
    auto shape_t = in.at("shape." + key).to(torch::kInt64), orig_t = in.at("orig." + key).to(torch::kInt64);
    auto rp = in.at("ratio_pad." + key).to(torch::kFloat64);
    const std::array<int64_t, 2> shape{shape_t[0].item<int64_t>(), shape_t[1].item<int64_t>()};
    const std::array<int64_t, 2> orig{orig_t[0].item<int64_t>(), orig_t[1].item<int64_t>()};
    structures::RatioPad lb{rp[0].item<double>(), rp[1].item<double>(), rp[2].item<double>(), rp[3].item<double>()};
    out.emplace_back("proto." + key, engine::process_mask(protos, coefs, boxes, shape));
    auto native = engine::process_mask_native(protos, coefs, boxes, shape);
    out.emplace_back("native." + key, native);
    auto scaled = engine::scale_boxes(boxes, lb, orig);
    out.emplace_back("boxes_scaled." + key, scaled);
    out.emplace_back("masks_scaled." + key, engine::scale_masks(native, lb, orig).to(torch::kUInt8));
    out.emplace_back("native_orig." + key, engine::process_mask_native(protos, coefs, scaled, orig));
  }
}

int run_validate(int argc, char** argv) {
  if (argc < 7) throw std::runtime_error("validate needs MODEL.yaml NC WEIGHTS BATCHES OUT");
  const std::string yaml = argv[2], weights = argv[4], batches_path = argv[5], out_path = argv[6];
  const int nc = std::stoi(argv[3]);
  engine::ValidatorOptions o;
  for (int i = 7; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nms" && i + 1 < argc)
      o.nms = config::read_nms("--nms", argv[++i]);
    else if (a == "--json" && i + 1 < argc)
      o.save_json = argv[++i];
    else
      throw std::runtime_error("unknown option " + a);
  }
  model::SegmentationModel m(config::load_model_spec(yaml, nc));
  model::load_state(*m, model::read_safetensors(weights), weights);
  auto in = model::read_safetensors(batches_path);
  int64_t b = 0, global = 0;
  auto source = [&](engine::ValBatch& batch) {
    const auto k = std::to_string(b);
    if (!in.count("img." + k)) return false;
    batch.images = in.at("img." + k);
    batch.targets.batch_idx = in.at("batch_idx." + k);
    batch.targets.cls = in.at("cls." + k);
    batch.targets.bboxes = in.at("bboxes." + k);
    batch.targets.masks = in.at("masks." + k);
    batch.targets.sem_masks = Tensor();
    auto orig = in.at("orig." + k).to(torch::kInt64), lb = in.at("letterbox." + k).to(torch::kFloat64);
    batch.info.clear();
    for (int64_t i = 0; i < batch.images.size(0); ++i) {
      engine::ValImage v;
      v.orig_h = orig[i][0].item<int64_t>();
      v.orig_w = orig[i][1].item<int64_t>();
      v.letterbox = {lb[i][0].item<double>(), lb[i][1].item<double>(), lb[i][2].item<double>(),
                     lb[i][3].item<double>()};
      v.file = "images/" + std::to_string(1000 + global++) + ".jpg";
      batch.info.push_back(v);
    }
    ++b;
    return true;
  };
  model::NamedTensors out;
  int64_t image = 0;
  o.on_image = [&](const engine::ValImage&, const Tensor& dets, const Tensor&) {
    out.emplace_back("dets." + std::to_string(image++), dets.clone());
  };
  engine::Validator v(o);
  auto r = v.run(*m, torch::kCPU, source, nullptr, &std::cout);
  auto res = r.mean_results();
  out.emplace_back("results", vec(std::vector<double>(res.begin(), res.end())));
  out.emplace_back("fitness", vec({r.fitness()}));
  out.emplace_back("counts", torch::tensor({r.metrics.images, r.metrics.instances}, torch::kInt64));
  model::write_safetensors(out_path, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: val_oracle_tool metrics|nms|masks IN OUT | validate MODEL.yaml NC WEIGHTS BATCHES OUT\n";
    return 2;
  }
  try {
    const std::string what = argv[1];
    if (what == "validate") return run_validate(argc, argv);
    auto in = model::read_safetensors(argv[2]);
    model::NamedTensors out;
    if (what == "metrics")
      run_metrics(in, out);
    else if (what == "nms")
      run_nms(in, out);
    else if (what == "masks")
      run_masks(in, out);
    else
      throw std::runtime_error("unknown mode " + what);
    model::write_safetensors(argv[3], out);
  } catch (const std::exception& e) {
    std::cerr << "val_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
