// `lucid predict`: runs a weights file (a lucid checkpoint's EMA weights, lucid weights, an
// Ultralytics .pt; weights/model_source.h) on images and videos (a file, a folder, a glob or a list
// file: predict/predict_sources.h), `batch` images per forward, and writes runs/segment/predictN/:
// the images with masks, boxes and "name 0.87" tags drawn and each video's annotated frames as
// <name>.avi (save), labels/<name>.txt in YOLO segmentation format, <name>_<frame>.txt for a video's
// frames (save_txt: class and the normalised outline of each mask, save_conf appends the score),
// crops/<class>/<name>.jpg of each detection (save_crop), predictions.json (save_json: COCO results
// with bbox xywh and RLE segmentation).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/cli/outcome.h"
#include "lucid/config/fields.h"
#include "lucid/config/nms_fields.h"
#include "lucid/config/nms_option.h"
#include "lucid/config/user_settings.h"
#include "lucid/config/weights_fields.h"
#include "lucid/data/dataset.h"
#include "lucid/data/video.h"
#include "lucid/deploy/load_network.h"
#include "lucid/inference/replayed_network.h"
#include "lucid/metrics/rle.h"
#include "lucid/plot/annotate.h"
#include "lucid/predict/detection_crop.h"
#include "lucid/predict/predict_sources.h"
#include "lucid/predict/predict_stream.h"
#include "lucid/predict/predictor.h"
#include "lucid/predict/shape_lookahead.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/trainer.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/printable.h"
#include "lucid/weights/model_source.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

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
    for (int k = 2; !taken.insert(name).second; ++k)
      name = (stems[stem] > 1 ? fs::path(s).filename().string() : stem) + "_" + std::to_string(k);
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

struct Outputs {
  fs::path run_dir;
  bool draw = false, save_txt = false, save_conf = false, save_json = false, save_crop = false, save_frames = false;
  double line_width = 0;
  plot::DrawStyle style;
};

void write_txt(const fs::path& path, const engine::Prediction& p, bool save_conf) {
  util::write_atomically(path.string(), [&](std::ostream& out) {
    for (int64_t i = 0; i < p.boxes.size(0); ++i) {
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

void append_json(nlohmann::json& results, const engine::Prediction& p, const std::string& image_name,
                 const std::string& file_name, int64_t frame, const std::vector<std::string>& names) {
  for (int64_t i = 0; i < p.boxes.size(0); ++i) {
    auto b = p.boxes[i];
    const double x1 = b[0].item<float>(), y1 = b[1].item<float>(), x2 = b[2].item<float>(), y2 = b[3].item<float>();
    const auto& m = p.masks[static_cast<size_t>(i)];
    auto rle = metrics::rle_encode_window(m.pixels.data_ptr<uint8_t>(), static_cast<uint32_t>(m.height()),
                                          static_cast<uint32_t>(m.width()), static_cast<uint32_t>(m.x0),
                                          static_cast<uint32_t>(m.y0), static_cast<uint32_t>(p.orig_h),
                                          static_cast<uint32_t>(p.orig_w));
    const int64_t c = p.cls[i].item<int64_t>();
    auto r3 = [](double v) { return std::nearbyint(v * 1000) / 1000; };
    nlohmann::json r = {{"image_id", image_id_for(image_name)}, {"file_name", file_name}};
    if (frame > 0) r["frame"] = frame;
    r["category_id"] = c + 1;
    r["category_name"] = names[static_cast<size_t>(c)];
    r["bbox"] = {r3(x1), r3(y1), r3(x2 - x1), r3(y2 - y1)};
    r["score"] = std::nearbyint(p.conf[i].item<float>() * 1e5) / 1e5;
    r["segmentation"] = {{"size", {p.orig_h, p.orig_w}}, {"counts", metrics::rle_to_string(rle)}};
    results.push_back(std::move(r));
  }
}

// "2 circles, 1 square, " (or "(no detections), ") as the reference's Results.verbose().
std::string detections_summary(const engine::Prediction& p, const std::vector<std::string>& names) {
  std::vector<int64_t> counts(names.size(), 0);
  for (int64_t i = 0; i < p.boxes.size(0); ++i) ++counts[static_cast<size_t>(p.cls[i].item<int64_t>())];
  std::string summary;
  for (size_t c = 0; c < counts.size(); ++c)
    if (counts[c]) summary += std::to_string(counts[c]) + " " + util::printable(names[c]) + ", ";
  return summary.empty() ? "(no detections), " : summary;
}

// The settings of `lucid predict`, each option declared once (config/fields.h): a member's
// initializer, or its component's, is its option's default.
struct PredictSettings {
  std::string model, source, device, project;
  std::string name = "predict";
  config::ImageSize imgsz;  // 0 x 0: the model file's, else 640
  std::string classes;      // as given; po.classes holds the ids
  int64_t batch = 1;        // images (or video frames) per forward
  int64_t vid_stride = 1;
  bool save = true, verbose = true, exist_ok = false;
  bool stream = false, show = false, augment = false, visualize = false;  // the reference's keys
  engine::PredictOptions po;  // conf, iou, max_det, nms, agnostic_nms, retina_masks, amp
  Outputs outputs;            // what is written and how it is drawn
};

const config::FieldList<PredictSettings>& predict_fields() {
  using S = PredictSettings;
  using engine::PredictOptions;
  static const auto* list = [] {
    auto* f = new config::FieldList<S>("predict");
    config::declare_weights_model(*f,
                                  ", an Ultralytics .pt, a compiled package (.pt2, lucid export format=aoti) or a "
                                  "TorchScript file (.torchscript, lucid export format=torchscript)",
                                  &S::model);
    f->text("source", "",
            "an image or video file, a folder, a glob ('imgs/*.jpg', 'data/**/*.png') or a list file (.txt: a path a "
            "line; .csv: comma-separated); URLs and cameras are not supported")
        .to(&S::source);
    config::declare_predict_imgsz(*f,
                                  "input size: one size (the long side) or [h, w] (imgsz=480,640), each a multiple "
                                  "of 32; default: the model file's, else 640",
                                  &S::imgsz);
    f->number("conf", "confidence threshold").fraction().to(&S::po, &PredictOptions::conf);
    config::declare_nms_fields<PredictOptions>(*f, "", std::numeric_limits<int64_t>::max(), &S::po);
    f->text("classes", "keep only these class ids, e.g. 0,2").to(&S::classes).also([](S& s, const std::string& v) {
      s.po.classes = parse_classes(v);
    });
    f->integer("batch", "images (or video frames) per forward").range(1, 1024).to(&S::batch);
    f->integer("vid_stride", "predict every N-th video frame").range(1, 1 << 20).to(&S::vid_stride);
    f->flag("agnostic_nms", "class-agnostic NMS").to(&S::po, &PredictOptions::agnostic_nms);
    f->flag("retina_masks", "masks at the original image resolution").to(&S::po, &PredictOptions::retina_masks);
    f->text("device", "", "cpu, 0, cuda:0 (default: the GPU when usable)").to(&S::device);
    f->flag("half", "BF16 autocast on CUDA").to(&S::po, &PredictOptions::amp);
    f->flag("save", "write the annotated images and videos (<name>.avi, Motion JPEG)").to(&S::save);
    f->flag("save_frames", "also write each annotated video frame, <name>_frames/<name>_<frame>.jpg")
        .to(&S::outputs, &Outputs::save_frames);
    f->flag("save_txt", "write labels/<name>.txt, <name>_<frame>.txt for videos (class and normalised mask outline)")
        .to(&S::outputs, &Outputs::save_txt);
    f->flag("save_conf", "append the score to each save_txt line").to(&S::outputs, &Outputs::save_conf);
    f->flag("save_json", "write predictions.json (COCO results)").to(&S::outputs, &Outputs::save_json);
    f->flag("save_crop", "write crops/<class>/<name>.jpg: each detection's box cut from the image")
        .to(&S::outputs, &Outputs::save_crop);
    f->flag("show_labels", "draw the class tags").to(&S::outputs, &Outputs::style, &plot::DrawStyle::labels);
    f->flag("show_conf", "put the score in the tags").to(&S::outputs, &Outputs::style, &plot::DrawStyle::conf);
    f->flag("show_boxes", "draw the boxes and their tags (False: masks only)")
        .to(&S::outputs, &Outputs::style, &plot::DrawStyle::boxes);
    f->number("line_width", "", "box line width in pixels (default or 0: from the image size)")
        .min(0)
        .resolve([](const S&) { return 0.0; })
        .to(&S::outputs, &Outputs::line_width);
    config::declare_run_folder(*f, "run name (predict, predict2, ...)", &S::project, &S::name, &S::exist_ok);
    f->flag("verbose", "print a line per image and the speed").to(&S::verbose);
    f->flag("stream", "the reference's Python generator of results; the command streams its sources either way")
        .to(&S::stream);
    f->flag("show", "a display window: not available (a warning; save=True writes the images)").to(&S::show);
    f->flag("augment", "test-time augmentation: segmentation models predict at one scale (a warning), as the reference")
        .to(&S::augment);
    f->flag("visualize", "the feature maps of every layer: not available")
        .check([](const bool& v) { return !v; }, "writing the feature maps of every layer is not available in lucid",
               {"True"})
        .to(&S::visualize);
    return f;
  }();
  return *list;
}

// As the reference on a machine without a display (check_imshow) and for segmentation heads
// (_predict_augment): a warning, and the prediction goes on.
void warn_unavailable(const PredictSettings& s) {
  if (s.show)
    std::fprintf(stderr, "warning: show=True: lucid has no display window; save=True writes the annotated images\n");
  if (s.augment)
    std::fprintf(stderr, "warning: Model does not support 'augment=True', reverting to single-scale prediction.\n");
}

// The annotated video of one source at a time: closed when its frames end.
class VideoOutput {
 public:
  void write(const fs::path& file, size_t source, double source_fps, const data::Image& frame) {
    if (writer_ && source_ != source) close();
    if (!writer_) {
      // The reference's int(fps); a stream that does not say plays at 30.
      const int fps = source_fps >= 1 ? static_cast<int>(source_fps) : 30;
      writer_ = std::make_unique<data::VideoWriter>(file.string(), frame.width, frame.height, fps);
      source_ = source;
    }
    writer_->write(frame);
  }
  void close() {
    if (writer_) writer_->close();
    writer_.reset();
  }

 private:
  std::unique_ptr<data::VideoWriter> writer_;
  size_t source_ = 0;
};

// save=True: the image drawn with its detections; a video's frame goes into its video (and with
// save_frames into <name>_frames/).
void save_drawn(const Outputs& o, const engine::PredictItem& item, const data::Image& image,
                const engine::Prediction& p, const std::vector<std::string>& names, const std::string& path,
                const std::string& name, const std::string& frame_name, VideoOutput& video) {
  plot::Canvas canvas(image);
  plot::DrawStyle style = o.style;
  style.line_width = o.line_width > 0 ? o.line_width : std::max(std::round((p.orig_h + p.orig_w) / 2.0 * 0.003), 2.0);
  style.font_size = std::max(11.0, style.line_width * 5.5);
  plot::Instances inst{p.boxes, p.cls, p.conf, torch::Tensor(), 1.0, p.masks};
  plot::draw_instances(canvas, inst, names, 0, 0, 1.0, style);
  if (item.video) {
    video.write(o.run_dir / (name + ".avi"), item.source, item.fps, canvas.image());
    if (o.save_frames) {
      const auto frames_dir = o.run_dir / (name + "_frames");
      fs::create_directories(frames_dir);
      canvas.save((frames_dir / (frame_name + ".jpg")).string());
    }
  } else {
    auto ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    canvas.save((o.run_dir / (name + (ext == ".png" ? ".png" : ".jpg"))).string());
  }
}

// "image 1/3 path: " or "video 1/1 (frame 3/30) path: ", as the reference logs them.
std::string item_place(const engine::PredictItem& item, size_t sources) {
  const std::string of = std::to_string(item.source + 1) + "/" + std::to_string(sources);
  if (!item.video) return "image " + of;
  const std::string frames = item.frames > 0 ? std::to_string(item.frames) : "?";
  return "video " + of + " (frame " + std::to_string(item.frame) + "/" + frames + ")";
}

// The network of a prediction. A weights file's network (recording its forward on a GPU: inference/
// replayed_network.h) is kept for the next prediction of the same file, unchanged, on the same
// device and settings: a process that predicts again (the Python package's model.predict in a loop)
// then replays the shapes it recorded instead of loading and recording anew. One network is kept,
// never freed (its recordings must not outlive the CUDA context at exit).
std::shared_ptr<engine::LoadedNetwork> prediction_network(const std::string& checkpoint, const torch::Device& device,
                                                          bool amp, const std::optional<bool>& nms) {
  static std::mutex mutex;
  static auto* kept = new std::pair<std::string, std::shared_ptr<engine::LoadedNetwork>>();
  std::error_code ec;
  const auto stamp = fs::last_write_time(checkpoint, ec).time_since_epoch().count();
  const auto size = fs::file_size(checkpoint, ec);
  const std::string key = fs::absolute(checkpoint).string() + "|" + std::to_string(size) + "|" + std::to_string(stamp) +
                          "|" + device.str() + "|" + std::to_string(amp) + "|" + (nms ? std::to_string(*nms) : "unset");
  std::lock_guard<std::mutex> lock(mutex);
  if (kept->second && kept->first == key) return kept->second;
  auto loaded = std::make_shared<engine::LoadedNetwork>(engine::load_network("model", checkpoint, device, amp, nms));
  if (!loaded->model) return loaded;  // an exported file: loaded anew each time
  loaded->network = engine::replayed_on_gpu(std::move(loaded->network));
  *kept = {key, loaded};
  return loaded;
}

// The images of a prediction for its shape look-ahead: the stream's image files, or its images
// given in memory with their sizes.
// Images whose input shapes are all recorded before the first image is predicted (a few seconds of
// prediction: the shapes of later images are recorded meanwhile).
constexpr size_t kSettledImages = 1024;

// Before the first image, outside its time: the network warmed up on the first batch, and the
// shapes of the images ahead recorded, so that no image waits for one.
void warm_up_stream(engine::ReplayedNetwork& network, std::optional<engine::ShapeLookahead>& lookahead,
                    std::span<const data::Image> first, const engine::PredictOptions& po) {
  engine::warm_up(network, first, po);
  if (lookahead) lookahead->settle(kSettledImages);
}

// LUCID_PREDICT_TRACE=1 prints each batch's stages on stderr, to find where a slow image went.
bool trace_requested() {
  const char* trace = std::getenv("LUCID_PREDICT_TRACE");
  return trace && std::strcmp(trace, "1") == 0;
}

void trace_batch(size_t images, const engine::PredictTimes& before, const engine::PredictTimes& after) {
  std::fprintf(stderr, "trace: batch of %zu: %.2f ms preprocess, %.2f ms inference, %.2f ms postprocess\n", images,
               after.preprocess - before.preprocess, after.inference - before.inference,
               after.postprocess - before.postprocess);
}

// The reference's closing "Speed:" line, split by stage, and the input shapes replayed.
void print_speed(int64_t predicted, double total_ms, const engine::PredictTimes& stages, const torch::Device& device,
                 const engine::ReplayedNetwork* replayed) {
  const double n = static_cast<double>(std::max<int64_t>(predicted, 1));
  std::printf(
      "Speed: %.1fms per image (preprocess, inference and postprocess) on %s: %.1fms preprocess, "
      "%.1fms inference, %.1fms postprocess\n",
      total_ms / n, device.str().c_str(), stages.preprocess / n, stages.inference / n, stages.postprocess / n);
  if (replayed)
    std::printf("The forward replayed recordings of %lld input shape(s) (CUDA graphs)\n",
                static_cast<long long>(replayed->recorded()));
}

std::vector<engine::LookaheadImage> lookahead_images(const std::vector<std::string>& sources, size_t images,
                                                     const std::vector<std::pair<int, int>>& memory_sizes) {
  std::vector<engine::LookaheadImage> out;
  for (size_t k = 0; k < images && k < sources.size(); ++k) {
    const auto size = k < memory_sizes.size() ? memory_sizes[k] : std::pair<int, int>{0, 0};
    out.push_back({sources[k], size.first, size.second});
  }
  return out;
}

// The next batch of images or frames from the stream (empty at its end; `more` turns false once
// the stream has ended, and it is not asked again).
std::vector<engine::PredictItem> next_items(engine::PredictStream& stream, size_t batch, bool& more) {
  std::vector<engine::PredictItem> items;
  while (more && items.size() < batch) {
    engine::PredictItem item;
    if (stream.next(item))
      items.push_back(std::move(item));
    else
      more = false;
  }
  return items;
}

// The input size: imgsz= as given (a square or h x w), else the weights file's, else 640; a
// fixed-input file takes its own size only.
engine::InputSize prediction_imgsz(const PredictSettings& s, const config::Options& options,
                                   const engine::LoadedNetwork& loaded) {
  const engine::InputSize size = s.imgsz.h > 0
                                     ? engine::InputSize(static_cast<int>(s.imgsz.h), static_cast<int>(s.imgsz.w))
                                     : engine::InputSize(loaded.imgsz > 0 ? static_cast<int>(loaded.imgsz) : 640);
  if (loaded.fixed_imgsz && size != engine::InputSize(static_cast<int>(loaded.imgsz)))
    throw UserError("option imgsz=" + options.str("imgsz") + ": model=" + s.model +
                    " is compiled for imgsz=" + std::to_string(loaded.imgsz) + " only");
  return size;
}

}  // namespace

int predict_command(const std::vector<std::string>& args) { return predict_run(args, {}).exit_code; }

CommandOutcome predict_run(const std::vector<std::string>& command_line, const PredictSink& sink,
                           std::vector<engine::MemoryImage>* memory) {
  const auto args = config::map_deprecated_end2end(command_line);
  auto options = predict_fields().options();
  if (!options.parse_or_help(args)) return {};
  const auto settings = predict_fields().read(options);
  const auto& checkpoint = settings.model;
  if (checkpoint.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  warn_unavailable(settings);
  engine::PredictOptions po = settings.po;
  const auto batch = static_cast<size_t>(settings.batch);
  const int vid_stride = static_cast<int>(settings.vid_stride);
  const bool save = settings.save;
  Outputs o = settings.outputs;
  const bool verbose = settings.verbose;
  if (memory && options.given("source"))
    throw UserError("option source=" + settings.source + ": the images are given in memory; leave source= out");
  const auto listed = memory ? engine::PredictSources{} : engine::list_predict_sources(settings.source);
  if (!listed.videos.empty() && !data::video::available())
    throw UserError("source=" + settings.source + ": " + listed.videos.front() + " is a video and " +
                    data::video::unavailable_message());
  std::optional<engine::PredictStream> opened;
  std::vector<std::pair<int, int>> memory_sizes;  // of the images given in memory (0 x 0: a file to read)
  if (memory)
    for (const auto& m : *memory)
      memory_sizes.emplace_back(m.pixels ? m.pixels->height : 0, m.pixels ? m.pixels->width : 0);
  if (memory)
    opened.emplace(std::move(*memory));
  else
    opened.emplace(listed.images, listed.videos, vid_stride);
  auto& stream = *opened;
  const auto& sources = stream.paths();
  const auto out_names = output_names(sources);
  const torch::Device device = util::parse_device(settings.device);
  if (device.is_cpu()) util::use_reference_cpu_threads();
  const auto kept = prediction_network(checkpoint, device, po.amp, po.nms);
  auto& loaded = *kept;
  if (loaded.model)
    config::warn_without_one_to_one(po.nms, loaded.model->end2end(), checkpoint);
  else if (options.given("nms") && loaded.network->end2end() != (po.nms == std::optional<bool>(false)))
    std::fprintf(stderr, "warning: nms=%s: %s is exported with its %s, which it runs\n", options.str("nms").c_str(),
                 checkpoint.c_str(), loaded.network->end2end() ? "one-to-one head" : "one-to-many head for NMS");
  po.imgsz = prediction_imgsz(settings, options, loaded);
  const auto& names = loaded.names;  // the file's, else the reference's placeholders
  for (auto c : po.classes)
    if (c >= static_cast<int64_t>(names.size()))
      throw UserError("option classes=" + settings.classes + ": class " + std::to_string(c) + " is not in the model (" +
                      std::to_string(names.size()) + " classes)");

  // A run folder only where something is written into it (the reference's save, save_txt, save_crop).
  const bool writes = save || o.save_txt || o.save_crop || o.save_json;
  std::optional<engine::RunFolderLock> run_lock;  // one predict at a time in a folder (exist_ok=True shares one)
  if (writes) {
    o.run_dir = engine::make_run_dir(settings.project, settings.name, settings.exist_ok);
    fs::remove(o.run_dir / "weights");  // an empty folder from make_run_dir; prediction writes no weights
    run_lock.emplace(o.run_dir, "predict");
    util::remove_dead_temporaries(o.run_dir.string(), "", 2);  // a killed predict's video or image temporaries
  }
  if (o.save_txt) fs::create_directories(o.run_dir / "labels");
  o.draw = save && plot::available();
  if (save && !o.draw) plot::skip_warning();

  nlohmann::json results = nlohmann::json::array();
  double total_ms = 0;
  engine::PredictTimes stages;  // summed over the batches
  int64_t predicted = 0;
  VideoOutput video;
  engine::CropFiles crops(o.run_dir / "crops");
  auto* replayed = dynamic_cast<engine::ReplayedNetwork*>(loaded.network.get());
  std::optional<engine::ShapeLookahead> lookahead;
  if (replayed) lookahead.emplace(*replayed, lookahead_images(sources, stream.image_count(), memory_sizes), batch, po);
  const auto notify = [&sink](PredictEvent e) {
    if (sink.event) sink.event(e);
  };
  notify(PredictEvent::Start);
  const bool trace_stages = trace_requested();
  bool more = true;
  for (auto items = next_items(stream, batch, more); !items.empty(); items = next_items(stream, batch, more)) {
    notify(PredictEvent::BatchStart);
    std::vector<data::Image> images;
    images.reserve(items.size());
    for (auto& it : items) images.push_back(std::move(it.image));
    if (replayed && predicted == 0) warm_up_stream(*replayed, lookahead, images, po);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<engine::Prediction> preds;
    const engine::PredictTimes before = stages;
    try {
      preds = engine::predict_images(*loaded.network, images, po, &stages);
    } catch (const engine::NonFiniteOutputs& e) {
      throw UserError("model=" + checkpoint + ": " + e.what());
    }
    if (trace_stages) trace_batch(items.size(), before, stages);
    // Each image's share of the batch's time, as the reference reports per-image speed.
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                      static_cast<double>(items.size());
    total_ms += ms * static_cast<double>(items.size());
    predicted += static_cast<int64_t>(items.size());
    const int multiple = engine::batch_pad_multiple(*loaded.network, images, po.imgsz);

    for (size_t k = 0; k < items.size(); ++k) {
      const auto& item = items[k];
      const auto& image = images[k];
      const auto& p = preds[k];
      const auto& path = sources[item.source];
      const auto& name = out_names[item.source];
      const auto input = engine::predict_letterbox(p.orig_h, p.orig_w, po.imgsz, multiple);
      // "image 1/3 path: 384x640 2 circles, 1 square, 12.3ms", with the size of the network input.
      if (verbose)
        std::printf("%s %s: %dx%d %s%.1fms\n", item_place(item, sources.size()).c_str(), path.c_str(), input.height,
                    input.width, detections_summary(p, names).c_str(), ms);
      // A video frame's outputs carry its number: <name>_<frame>.
      const std::string frame_name = item.video ? name + "_" + std::to_string(item.frame) : name;
      if (o.draw) save_drawn(o, item, image, p, names, path, name, frame_name, video);
      if (o.save_txt) write_txt(o.run_dir / "labels" / (frame_name + ".txt"), p, o.save_conf);
      if (o.save_crop) engine::write_crops(crops, frame_name, image, p, names);
      if (o.save_json) append_json(results, p, frame_name, fs::path(path).filename().string(), item.frame, names);
      if (sink.image)
        sink.image(PredictedImage{path, item.video, item.frame, item.frames, image, p, names, input.height, input.width,
                                  ms, writes ? o.run_dir.string() : std::string()});
    }
    notify(PredictEvent::BatchEnd);
  }
  video.close();
  const int64_t skipped = listed.skipped + stream.skipped();
  if (skipped) {
    const int64_t considered = static_cast<int64_t>(sources.size()) + listed.skipped;
    std::printf("%lld of %lld %s skipped (see the warnings)\n", static_cast<long long>(skipped),
                static_cast<long long>(considered), listed.videos.empty() ? "image files" : "files");
  }
  if (stream.incomplete())
    std::printf("%lld video(s) cut short by a decoding error (see the warnings)\n",
                static_cast<long long>(stream.incomplete()));
  if (predicted == 0)
    throw UserError(memory ? std::string("predict: no image was given")
                           : "source=" + settings.source + ": no image or video frame could be read");
  if (o.save_json)
    util::write_atomically((o.run_dir / "predictions.json").string(),
                           [&](std::ostream& out) { out << results.dump(); });
  if (verbose) print_speed(predicted, total_ms, stages, device, replayed);
  if (writes) std::printf("Results saved to %s\n", o.run_dir.string().c_str());
  notify(PredictEvent::End);
  return CommandOutcome{0, writes ? o.run_dir.string() : std::string(), names, std::nullopt};
}

config::Options predict_options() { return predict_fields().options(); }

}  // namespace lucid::cli
