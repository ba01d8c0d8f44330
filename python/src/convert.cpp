#include "convert.h"

#include <pybind11/stl.h>

#include <string_view>

#include "lucid/predict/predictor.h"

namespace py = pybind11;

namespace lucid::python {

namespace {

template <typename T>
py::bytes raw_bytes(const T* data, size_t count) {
  return py::bytes(reinterpret_cast<const char*>(data), count * sizeof(T));
}

// A row-major (rows x cols) table of doubles as bytes, read by numpy.frombuffer.
py::bytes table_bytes(const std::vector<double>& v) { return raw_bytes(v.data(), v.size()); }

// One set's numbers: the reference's Metric attributes (p, r, f1, ap50, ap per class with ground
// truth; ap_class_index; mp, mr, map50, map75, map), its all_ap (classes x 10) and curves (classes x
// 1000: precision, recall and F1 against confidence, precision against recall at IoU 0.5).
py::dict set_dict(const metrics::SetResults& mean, const metrics::ClassMetrics& detail) {
  py::list ap50, ap, classes;
  std::vector<double> all_ap;
  for (size_t i = 0; i < detail.size(); ++i) {
    ap50.append(detail.ap50(i));
    ap.append(detail.ap50_95(i));
    classes.append(detail.classes[i]);
    all_ap.insert(all_ap.end(), detail.ap[i].begin(), detail.ap[i].end());
  }
  py::dict d;
  d["p"] = py::cast(detail.p);
  d["r"] = py::cast(detail.r);
  d["f1"] = py::cast(detail.f1);
  d["ap50"] = ap50;
  d["ap"] = ap;
  d["ap_class_index"] = classes;
  d["mp"] = mean.precision;
  d["mr"] = mean.recall;
  d["map50"] = mean.map50;
  d["map75"] = detail.size() ? detail.map75() : 0.0;
  d["map"] = mean.map50_95;
  d["all_ap"] = table_bytes(all_ap);
  d["p_curve"] = table_bytes(detail.p_curve);
  d["r_curve"] = table_bytes(detail.r_curve);
  d["f1_curve"] = table_bytes(detail.f1_curve);
  d["pr_curve"] = table_bytes(detail.pr_curve);
  return d;
}

}  // namespace

py::dict metrics_dict(const engine::ValResults& r) {
  py::dict d;
  d["box"] = set_dict(r.metrics.box, r.metrics.box_detail);
  d["seg"] = set_dict(r.metrics.mask, r.metrics.mask_detail);
  d["fitness"] = r.fitness();
  py::dict results;
  const auto mean = r.mean_results();
  for (size_t k = 0; k < mean.size(); ++k) results[py::str(engine::ValResults::keys()[k])] = mean[k];
  results["fitness"] = r.fitness();
  d["results_dict"] = results;
  d["speed"] = py::dict(py::arg("preprocess") = r.speed.preprocess, py::arg("inference") = r.speed.inference,
                        py::arg("loss") = r.speed.loss, py::arg("postprocess") = r.speed.postprocess);
  d["images"] = r.metrics.images;
  d["instances"] = r.metrics.instances;
  d["instances_per_class"] = py::cast(r.metrics.instances_per_class);
  d["images_per_class"] = py::cast(r.metrics.images_per_class);
  d["confusion_matrix"] = table_bytes(r.confusion.counts());  // (nc + 1)^2, [predicted, true]
  return d;
}

py::dict outcome_dict(const cli::CommandOutcome& o) {
  py::dict d;
  d["exit_code"] = o.exit_code;
  d["save_dir"] = o.run_dir;
  d["names"] = py::cast(o.names);
  d["metrics"] = o.results ? py::object(metrics_dict(*o.results)) : py::object(py::none());
  return d;
}

py::dict prediction_dict(const cli::PredictedImage& item) {
  const auto& p = item.prediction;
  const int64_t n = p.boxes.size(0);
  auto boxes = p.boxes.contiguous().to(torch::kFloat32);
  auto conf = p.conf.contiguous().to(torch::kFloat32);
  auto cls = p.cls.contiguous().to(torch::kInt64);
  py::list masks, outlines;
  for (int64_t i = 0; i < n; ++i) {
    const auto& m = p.masks[static_cast<size_t>(i)];
    const int h = m.height(), w = m.width();
    const uint8_t* px = m.empty() ? nullptr : m.pixels.data_ptr<uint8_t>();
    masks.append(py::make_tuple(m.x0, m.y0, w, h, px ? raw_bytes(px, static_cast<size_t>(h) * w) : py::bytes()));
    // Every outer contour in image pixels, as OpenCV finds them; Masks.xy merges them as the reference.
    py::list contours;
    for (auto& c : px ? engine::mask_contours(px, h, w) : std::vector<std::vector<float>>{}) {
      for (size_t j = 0; j < c.size(); j += 2) c[j] += static_cast<float>(m.x0), c[j + 1] += static_cast<float>(m.y0);
      contours.append(raw_bytes(c.data(), c.size()));
    }
    outlines.append(contours);
  }
  py::dict d;
  d["path"] = item.path;
  d["video"] = item.video;
  d["frame"] = item.frame;
  d["frames"] = item.frames;
  d["orig_shape"] = py::make_tuple(p.orig_h, p.orig_w);
  d["input_shape"] = py::make_tuple(item.input_height, item.input_width);
  d["image"] = raw_bytes(item.image.pixels.data(), item.image.pixels.size());
  d["channels"] = item.image.channels;
  d["n"] = n;
  d["boxes"] = raw_bytes(boxes.data_ptr<float>(), static_cast<size_t>(n) * 4);
  d["conf"] = raw_bytes(conf.data_ptr<float>(), static_cast<size_t>(n));
  d["cls"] = raw_bytes(cls.data_ptr<int64_t>(), static_cast<size_t>(n));
  d["masks"] = masks;
  d["outlines"] = outlines;
  d["names"] = py::cast(item.names);
  d["milliseconds"] = item.milliseconds;
  d["save_dir"] = item.save_dir;
  return d;
}

py::list mask_contours(const py::bytes& mask, int height, int width) {
  const std::string_view px(mask);
  if (height < 0 || width < 0 || px.size() != static_cast<size_t>(height) * static_cast<size_t>(width))
    throw py::value_error("mask_contours: expected height * width bytes");
  py::list contours;
  if (px.empty()) return contours;
  for (const auto& c : engine::mask_contours(reinterpret_cast<const uint8_t*>(px.data()), height, width))
    contours.append(raw_bytes(c.data(), c.size()));
  return contours;
}

py::dict event_dict(const engine::FitEvent& e) {
  py::dict d;
  d["event"] = engine::event_name(e.kind);
  d["epoch"] = e.epoch;
  d["epochs"] = e.epochs;
  d["batch"] = e.batch;
  d["loss_names"] = py::cast(e.loss_names);
  d["loss_items"] = py::cast(std::vector<double>(e.loss_items.begin(), e.loss_items.end()));
  d["tloss"] = py::cast(std::vector<double>(e.tloss.begin(), e.tloss.end()));
  d["metrics"] = py::cast(std::vector<double>(e.metrics.begin(), e.metrics.end()));
  d["val_losses"] = py::cast(std::vector<double>(e.val_losses.begin(), e.val_losses.end()));
  d["fitness"] = e.fitness;
  d["validated"] = e.validated;
  d["lr"] = py::cast(e.lr);
  d["save_dir"] = e.run_dir;
  d["training"] = e.training;
  if (e.val_results) d["val_results"] = metrics_dict(*e.val_results);
  return d;
}

}  // namespace lucid::python
