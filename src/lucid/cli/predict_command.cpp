// `lucid predict`: runs a weights file (a lucid checkpoint's EMA weights, lucid weights, an
// Ultralytics .pt; engine/model_source.h) on an image or a
// folder of images and writes runs/segment/predictN/: the images with masks, boxes and
// "name 0.87" tags drawn (save), labels/<stem>.txt in YOLO segmentation format (save_txt: class and
// the normalised outline of each mask, save_conf appends the score), predictions.json (save_json:
// COCO results with bbox xywh and RLE segmentation).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/data/dataset.h"
#include "lucid/engine/network.h"
#include "lucid/engine/predictor.h"
#include "lucid/engine/trainer.h"
#include "lucid/metrics/rle.h"
#include "lucid/plot/annotate.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

config::Options predict_options() {
  return config::Options(
      "predict", {{"model", "",
                   "weights: a lucid train checkpoint (weights/best.safetensors), lucid weights (.safetensors), "
                   "an Ultralytics .pt or a compiled package (.pt2, lucid export format=aoti)"},
                  {"source", "", "an image file or a folder of images (JPEG, PNG)"},
                  {"imgsz", "", "input size (long side, padded to a multiple of 32; default: the model file's, else 640)"},
                  {"conf", "0.25", "confidence threshold"},
                  {"iou", "0.7", "NMS IoU threshold"},
                  {"classes", "", "keep only these class ids, e.g. 0,2"},
                  {"max_det", "300", "detections per image"},
                  {"agnostic_nms", "False", "class-agnostic NMS"},
                  {"retina_masks", "False", "masks at the original image resolution"},
                  {"device", "", "cpu, 0, cuda:0 (default: the GPU when usable)"},
                  {"half", "True", "BF16 autocast on CUDA"},
                  {"save", "True", "write the annotated images"},
                  {"save_txt", "False", "write labels/<stem>.txt (class and normalised mask outline)"},
                  {"save_conf", "False", "append the score to each save_txt line"},
                  {"save_json", "False", "write predictions.json (COCO results)"},
                  {"show_labels", "True", "draw the class tags"},
                  {"line_width", "", "box line width in pixels (default: from the image size)"},
                  {"project", "runs/segment", "folder of runs"},
                  {"name", "predict", "run name (predict, predict2, ...)"},
                  {"exist_ok", "False", "reuse project/name if it exists"}});
}

std::vector<int64_t> parse_classes(const std::string& spec) {
  std::vector<int64_t> out;
  if (spec.empty()) return out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw UserError("option classes=" + spec + ": expected class ids like 0,2");
    }
  }
  return out;
}

// The images of source=: the file itself, or the image files of the folder (not its subfolders).
// Entries that cannot be examined (a link to itself, say) are warned about and left out.
std::vector<std::string> list_sources(const std::string& source, int64_t& skipped) {
  if (source.empty()) throw UserError("option source= is required (an image file or a folder)");
  std::error_code ec;
  if (!fs::exists(source, ec)) throw UserError("source=" + source + ": no such file or folder" +
                                               (ec ? " (" + ec.message() + ")" : std::string()));
  std::vector<std::string> files;
  if (fs::is_directory(source, ec)) {
    fs::directory_iterator it(source, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (!data::has_image_extension(it->path().string())) continue;
      std::error_code e;
      if (it->is_regular_file(e)) {
        files.push_back(it->path().string());
      } else if (e) {
        std::fprintf(stderr, "warning: %s: cannot be examined (%s); skipped\n", it->path().c_str(), e.message().c_str());
        ++skipped;
      }
    }
    if (ec) throw UserError("source=" + source + ": cannot list the folder (" + ec.message() + ")");
    std::sort(files.begin(), files.end());
    if (files.empty()) throw UserError("source=" + source + ": no image files in the folder");
  } else {
    files.push_back(source);
  }
  return files;
}

// The name each source's outputs take (drawn image, labels/<name>.txt, JSON image_id): its stem, or
// its file name where two sources share a stem (x.jpg and x.png give x.jpg and x.png, not one x),
// with _2, _3 ... added if names still clash.
std::vector<std::string> output_names(const std::vector<std::string>& sources) {
  std::map<std::string, int> stems;
  for (const auto& s : sources) ++stems[fs::path(s).stem().string()];
  std::vector<std::string> names;
  std::set<std::string> taken;
  for (const auto& s : sources) {
    const auto stem = fs::path(s).stem().string();
    std::string name = stems[stem] > 1 ? fs::path(s).filename().string() : stem;
    for (int k = 2; !taken.insert(name).second; ++k) name = (stems[stem] > 1 ? fs::path(s).filename().string() : stem) + "_" + std::to_string(k);
    names.push_back(name);
  }
  return names;
}

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

nlohmann::json image_id_for(const std::string& stem) {
  const bool numeric = !stem.empty() && stem.size() < 19 && std::all_of(stem.begin(), stem.end(), ::isdigit);
  return numeric ? nlohmann::json(std::stoll(stem)) : nlohmann::json(stem);
}

}  // namespace

int predict_command(const std::vector<std::string>& args) {
  auto options = predict_options();
  if (!options.parse_or_help(args)) return 0;
  const auto checkpoint = options.str("model");
  if (checkpoint.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  engine::PredictOptions po;
  if (!options.str("imgsz").empty()) po.imgsz = static_cast<int>(options.integer("imgsz", 32, config::kMaxImgsz));
  if (po.imgsz % 32 != 0) throw UserError("option imgsz=" + options.str("imgsz") + ": expected a multiple of 32");
  po.conf = options.number("conf");
  if (po.conf < 0 || po.conf > 1) throw UserError("option conf=" + options.str("conf") + ": expected 0..1");
  po.iou = options.number("iou");
  if (po.iou < 0 || po.iou > 1) throw UserError("option iou=" + options.str("iou") + ": expected 0..1");
  po.max_det = options.integer("max_det");
  if (po.max_det < 1) throw UserError("option max_det=" + options.str("max_det") + ": expected a positive integer");
  po.agnostic_nms = options.flag("agnostic_nms");
  po.classes = parse_classes(options.str("classes"));
  po.retina_masks = options.flag("retina_masks");
  po.amp = options.flag("half");
  const bool save = options.flag("save"), save_txt = options.flag("save_txt"), save_conf = options.flag("save_conf"),
             save_json = options.flag("save_json"), show_labels = options.flag("show_labels");
  double line_width = 0;
  if (!options.str("line_width").empty()) {
    line_width = options.number("line_width");
    if (line_width <= 0) throw UserError("option line_width=" + options.str("line_width") + ": expected a positive number");
  }
  int64_t skipped = 0;
  const auto sources = list_sources(options.str("source"), skipped);
  const auto stems = output_names(sources);
  const int64_t listing_skipped = skipped;
  int64_t predicted = 0;
  const torch::Device device = util::parse_device(options.str("device"));
  auto loaded = engine::load_network("model", checkpoint, device, po.amp);
  if (options.str("imgsz").empty()) po.imgsz = loaded.imgsz > 0 ? static_cast<int>(loaded.imgsz) : 640;
  if (loaded.fixed_imgsz && po.imgsz != loaded.imgsz)
    throw UserError("option imgsz=" + options.str("imgsz") + ": model=" + checkpoint + " is compiled for imgsz=" +
                    std::to_string(loaded.imgsz) + " only");
  const auto& names = loaded.names;  // the file's, else the reference's placeholders
  for (auto c : po.classes)
    if (c >= static_cast<int64_t>(names.size()))
      throw UserError("option classes=" + options.str("classes") + ": class " + std::to_string(c) + " is not in the model (" +
                      std::to_string(names.size()) + " classes)");

  auto run_dir = engine::make_run_dir(options.str("project"), options.str("name"), options.flag("exist_ok"));
  fs::remove(run_dir / "weights");  // an empty folder from make_run_dir; prediction writes no weights
  if (save_txt) fs::create_directories(run_dir / "labels");
  const bool draw = save && plot::available();
  if (save && !draw) plot::skip_warning();

  nlohmann::json results = nlohmann::json::array();
  double total_ms = 0;
  for (size_t k = 0; k < sources.size(); ++k) {
    const auto& path = sources[k];
    data::Image image;
    try {
      image = data::decode_image(path);
    } catch (const UserError& e) {
      if (sources.size() == 1) throw;  // the one image asked for: an error naming it
      std::fprintf(stderr, "warning: %s; image skipped\n", e.what());
      ++skipped;
      continue;
    }
    ++predicted;
    const auto t0 = std::chrono::steady_clock::now();
    auto p = engine::predict_image(*loaded.network, image, po);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_ms += ms;
    const int64_t n = p.boxes.size(0);

    // "image 1/3 path: 480x640 2 circles, 1 square, 12.3ms" as the reference logs it.
    std::vector<int64_t> counts(names.size(), 0);
    for (int64_t i = 0; i < n; ++i) ++counts[static_cast<size_t>(p.cls[i].item<int64_t>())];
    std::string summary;
    for (size_t c = 0; c < counts.size(); ++c)
      if (counts[c]) summary += std::to_string(counts[c]) + " " + names[c] + ", ";
    std::printf("image %zu/%zu %s: %dx%d %s%.1fms\n", k + 1, sources.size(), path.c_str(), p.orig_h, p.orig_w,
                summary.empty() ? "(no detections), " : summary.c_str(), ms);

    const auto& stem = stems[k];
    if (draw) {
      plot::Canvas canvas(image);
      plot::DrawStyle style;
      style.line_width = line_width > 0 ? line_width : std::max(std::round((p.orig_h + p.orig_w) / 2.0 * 0.003), 2.0);
      style.font_size = std::max(11.0, style.line_width * 5.5);
      style.labels = show_labels;
      plot::Instances inst{p.boxes, p.cls, p.conf, torch::Tensor(), 1.0, p.masks};
      plot::draw_instances(canvas, inst, names, 0, 0, 1.0, style);
      auto ext = fs::path(path).extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
      canvas.save((run_dir / (stem + (ext == ".png" ? ".png" : ".jpg"))).string());
    }
    if (save_txt) {
      util::write_atomically((run_dir / "labels" / (stem + ".txt")).string(), [&](std::ostream& out) {
        for (int64_t i = 0; i < n; ++i) {
          const auto& m = p.masks[static_cast<size_t>(i)];
          // The outline within the mask's window, moved to image pixels.
          const auto outline = engine::mask_outline(m.pixels.data_ptr<uint8_t>(), m.height(), m.width());
          if (outline.empty()) continue;
          out << p.cls[i].item<int64_t>();
          for (size_t j = 0; j < outline.size(); j += 2)
            out << " " << fmt_g((outline[j] + static_cast<float>(m.x0)) / p.orig_w) << " "
                << fmt_g((outline[j + 1] + static_cast<float>(m.y0)) / p.orig_h);
          if (save_conf) out << " " << fmt_g(p.conf[i].item<float>());
          out << "\n";
        }
      });
    }
    if (save_json) {
      for (int64_t i = 0; i < n; ++i) {
        auto b = p.boxes[i];
        const double x1 = b[0].item<float>(), y1 = b[1].item<float>(), x2 = b[2].item<float>(), y2 = b[3].item<float>();
        const auto& m = p.masks[static_cast<size_t>(i)];
        auto rle = metrics::rle_encode_window(m.pixels.data_ptr<uint8_t>(), static_cast<uint32_t>(m.height()),
                                              static_cast<uint32_t>(m.width()), static_cast<uint32_t>(m.x0),
                                              static_cast<uint32_t>(m.y0), static_cast<uint32_t>(p.orig_h),
                                              static_cast<uint32_t>(p.orig_w));
        const int64_t c = p.cls[i].item<int64_t>();
        auto r3 = [](double v) { return std::nearbyint(v * 1000) / 1000; };
        results.push_back({{"image_id", image_id_for(stem)},
                           {"file_name", fs::path(path).filename().string()},
                           {"category_id", c + 1},
                           {"category_name", names[static_cast<size_t>(c)]},
                           {"bbox", {r3(x1), r3(y1), r3(x2 - x1), r3(y2 - y1)}},
                           {"score", std::nearbyint(p.conf[i].item<float>() * 1e5) / 1e5},
                           {"segmentation", {{"size", {p.orig_h, p.orig_w}}, {"counts", metrics::rle_to_string(rle)}}}});
      }
    }
  }
  if (skipped) {
    const int64_t considered = static_cast<int64_t>(sources.size()) + listing_skipped;
    std::printf("%lld of %lld image files skipped (see the warnings)\n", static_cast<long long>(skipped),
                static_cast<long long>(considered));
    if (predicted == 0) throw UserError("source=" + options.str("source") + ": no image could be read");
  }
  if (save_json)
    util::write_atomically((run_dir / "predictions.json").string(), [&](std::ostream& out) { out << results.dump(); });
  std::printf("Speed: %.1fms per image (preprocess, inference and postprocess) on %s\n",
              total_ms / static_cast<double>(std::max<int64_t>(predicted, 1)), device.str().c_str());
  std::printf("Results saved to %s\n", run_dir.string().c_str());
  return 0;
}

}  // namespace lucid::cli
