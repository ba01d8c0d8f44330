// `lucid val`: validates a weights file (a lucid checkpoint's EMA weights, an Ultralytics .pt, lucid
// weights; engine/model_source.h) on a dataset split; data, imgsz and names come from the file
// where it has them, else from the options,
// prints the reference's table with per-class rows and the speed line, and writes the run folder
// (runs/segment/valN): plots, predictions.json with save_json, report.html.
#include <filesystem>
#include <iostream>
#include <limits>

#include "lucid/cli/commands.h"
#include "lucid/data/loader.h"
#include "lucid/engine/model_source.h"
#include "lucid/engine/evaluate.h"
#include "lucid/engine/train_options.h"
#include "lucid/engine/trainer.h"
#include "lucid/report/run_report.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

config::Options val_options() {
  return config::Options(
      "val", {{"model", "",
               "weights: a lucid train checkpoint (weights/best.safetensors), lucid weights (.safetensors) or an "
               "Ultralytics .pt"},
              {"data", "", "dataset YAML, folder or COCO JSON (default: the model file's data, else the synthetic set)"},
              {"split", "val", "split to validate: val or test"},
              {"imgsz", "", "input size (default: the model file's imgsz, else 640)"},
              {"batch", "16", "images per batch"},
              {"conf", "0.001", "confidence threshold"},
              {"iou", "0.7", "NMS IoU threshold"},
              {"max_det", "300", "detections per image"},
              {"agnostic_nms", "False", "class-agnostic NMS"},
              {"single_cls", "False", "treat all classes as one"},
              {"end2end", "True", "False: validate an end-to-end model through its one-to-many head and NMS"},
              {"device", "", "cpu, 0, cuda:0 (default: the GPU when usable)"},
              {"workers", "4", "loader threads"},
              {"half", "True", "BF16 autocast on CUDA"},
              {"save_json", "False", "write predictions.json (COCO results: bbox, RLE segmentation)"},
              {"plots", "True", "write curves, confusion matrices, val_batch images"},
              {"verbose", "True", "per-class rows"},
              {"allow_outside_images", "False", "follow COCO file_name paths that are absolute or lead out of the image folder (..)"},
              {"project", "runs/segment", "folder of runs"},
              {"name", "val", "run name (val, val2, ...)"},
              {"exist_ok", "False", "reuse project/name if it exists"}});
}

}  // namespace

int val_command(const std::vector<std::string>& args) {
  auto options = val_options();
  if (!options.parse_or_help(args)) return 0;
  const auto checkpoint = options.str("model");
  if (checkpoint.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  const auto split_name = options.str("split");
  if (split_name != "val" && split_name != "test") throw UserError("option split=" + split_name + ": expected val or test");
  const auto batch = options.integer("batch", 1, config::kMaxBatch);
  const auto workers = options.integer("workers", 0, std::numeric_limits<int>::max());
  const double conf = options.number("conf"), iou = options.number("iou");
  if (conf < 0 || conf > 1) throw UserError("option conf=" + options.str("conf") + ": expected 0..1");
  if (iou < 0 || iou > 1) throw UserError("option iou=" + options.str("iou") + ": expected 0..1");
  const auto max_det = options.integer("max_det");
  if (max_det < 1) throw UserError("option max_det=" + options.str("max_det") + ": expected a positive integer");
  const torch::Device device = util::parse_device(options.str("device"));
  if (device.is_cpu()) util::use_reference_cpu_threads();

  auto loaded = engine::load_inference_model("model", checkpoint, device);
  const auto& source = loaded.source;
  const int imgsz = !options.str("imgsz").empty() ? static_cast<int>(config::stride_multiple(options.integer("imgsz", 1, config::kMaxImgsz)))
                    : source.imgsz > 0             ? static_cast<int>(source.imgsz)
                                                   : 640;
  if (imgsz < 32 || imgsz % 32 != 0) throw UserError("option imgsz=" + std::to_string(imgsz) + ": expected a multiple of 32");
  std::string data_path = options.str("data").empty() ? source.data : options.str("data");
  if (data_path.empty()) data_path = default_dataset();

  data::IndexOptions io;
  io.allow_outside_images = options.flag("allow_outside_images");
  io.on_problem = [](const data::Problem& p) { std::fprintf(stderr, "warning: %s\n", p.str().c_str()); };
  auto index = data::build_index(data_path, io);
  const auto* split = index.find(split_name);
  if (!split) throw UserError(data_path + ": no '" + split_name + "' split");
  if (index.nc() != loaded.model->nc())
    throw UserError(data_path + ": " + std::to_string(index.nc()) + " classes, but " + checkpoint + " has " +
                    std::to_string(loaded.model->nc()));
  // The model's class names, as the reference's validator prints them; the dataset's where it has none.
  const auto names = source.names.empty() ? index.names : source.names;

  auto run_dir = engine::make_run_dir(options.str("project"), options.str("name"), options.flag("exist_ok"));
  fs::remove(run_dir / "weights");  // an empty folder from make_run_dir; validation writes no weights

  engine::ValidatorOptions vo;
  vo.conf = conf;
  vo.iou = iou;
  vo.max_det = max_det;
  vo.agnostic_nms = options.flag("agnostic_nms");
  vo.single_cls = options.flag("single_cls");
  vo.end2end = options.flag("end2end");
  vo.amp = options.flag("half");
  vo.verbose = options.flag("verbose");
  vo.speed = true;
  vo.names = names;
  vo.overlap_mask = source.overlap_mask.value_or(true);
  if (options.flag("save_json")) {
    vo.save_json = (run_dir / "predictions.json").string();
    if (index.format == data::DatasetFormat::Coco) vo.class_map = index.category_ids;
  }
  engine::EvaluateOptions eo;
  eo.imgsz = imgsz;
  eo.batch = static_cast<int>(batch);
  eo.workers = data::loader_workers(workers, batch, "val loader");
  eo.plots = options.flag("plots");
  eo.out_dir = run_dir.string();
  std::printf("lucid val: %s on %s split '%s' (%lld images), imgsz %d, device %s\n", checkpoint.c_str(),
              data_path.c_str(), split_name.c_str(), static_cast<long long>(split->images.size()), imgsz,
              device.str().c_str());
  auto prepared = engine::prepare_split(*split, imgsz, /*disk_cache=*/false, 0);
  auto r = engine::evaluate(*loaded.model, device, prepared, vo, eo, &std::cout);

  report::ReportContent rc;
  rc.title = "lucid val: " + run_dir.string();
  rc.final = &r;
  rc.names = names;
  rc.summary = {{"model", checkpoint}, {"data", data_path}, {"split", split_name}, {"imgsz", std::to_string(imgsz)},
                {"speed", engine::Validator(vo).format_speed(r.speed)}};
  report::write_report(run_dir.string(), rc);
  std::printf("Results saved to %s\n", run_dir.string().c_str());
  return 0;
}

}  // namespace lucid::cli
