// `lucid val`: validates a weights file (a lucid checkpoint's EMA weights, an Ultralytics .pt, lucid
// weights; weights/model_source.h) or an exported file (TorchScript, compiled package, ONNX through
// the Python package; deploy/load_network.h) on a dataset split; data, imgsz and names come from the
// file where it has them, else from the options,
// prints the reference's table with per-class rows and the speed line, and writes the run folder
// (runs/segment/valN): plots, predictions.json with save_json, report.html.
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "lucid/cli/commands.h"
#include "lucid/cli/outcome.h"
#include "lucid/config/fields.h"
#include "lucid/config/nms_fields.h"
#include "lucid/config/nms_option.h"
#include "lucid/config/user_settings.h"
#include "lucid/config/weights_fields.h"
#include "lucid/data/loader.h"
#include "lucid/data/synth.h"
#include "lucid/deploy/load_network.h"
#include "lucid/evaluate/evaluate.h"
#include "lucid/report/run_report.h"
#include "lucid/train/fit_events.h"
#include "lucid/train/train_options.h"
#include "lucid/train/trainer.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/weights/model_source.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

// The settings of `lucid val`, each option declared once (config/fields.h): a member's initializer,
// or its component's, is its option's default.
struct ValSettings {
  std::string model, data, device, project;
  std::string split = "val";
  std::string name = "val";
  int64_t imgsz = 0;  // 0: the model file's, else 640
  int64_t batch = 16;
  int workers = 4;
  bool save_json = false, plots = true, exist_ok = false;
  bool rect = false, save_txt = false;  // the reference's keys: rect has no effect, save_txt is refused
  std::string classes;                  // the reference's key: checked, no effect (warned)
  data::IndexOptions index;
  // conf, iou, max_det, agnostic_nms, single_cls, nms, amp, verbose: per-class rows by default (the
  // validator alone: none)
  engine::ValidatorOptions validator = [] {
    engine::ValidatorOptions o;
    o.verbose = true;
    return o;
  }();
};

const config::FieldList<ValSettings>& val_fields() {
  using S = ValSettings;
  using engine::ValidatorOptions;
  static const auto* list = [] {
    auto* f = new config::FieldList<S>("val");
    config::declare_weights_model(*f, " or an Ultralytics .pt", &S::model);
    f->text("data", "", "dataset YAML, folder or COCO JSON (default: the model file's data, else the synthetic set)")
        .to(&S::data);
    f->choice("split", "split to validate: val or test", {"val", "test"}).to(&S::split);
    config::declare_weights_imgsz(*f,
                                  "input size (default: the model file's imgsz, else 640); of [h, w] the larger "
                                  "side, as the reference",
                                  &S::imgsz, config::ImgszLists::LargerSide, "val");
    f->integer("batch", "images per batch").range(1, config::kMaxBatch).to(&S::batch);
    f->number("conf", "confidence threshold").fraction().to(&S::validator, &ValidatorOptions::conf);
    config::declare_nms_fields<ValidatorOptions>(*f, "", 1 << 20, &S::validator);
    f->flag("agnostic_nms", "class-agnostic NMS").to(&S::validator, &ValidatorOptions::agnostic_nms);
    f->flag("single_cls", "treat all classes as one").to(&S::validator, &ValidatorOptions::single_cls);
    f->text("device", "", "cpu, 0, cuda:0 (default: the GPU when usable)").to(&S::device);
    f->integer("workers", "loader threads").range(0, std::numeric_limits<int>::max()).to(&S::workers);
    f->flag("half", "BF16 autocast on CUDA").to(&S::validator, &ValidatorOptions::amp);
    f->flag("save_json", "write predictions.json (COCO results: bbox, RLE segmentation)").to(&S::save_json);
    f->flag("rect", "no effect: validation batches are rectangular either way, as the reference's val").to(&S::rect);
    f->text("classes", "", "no effect (a warning): the reference's segment validation does not filter classes either")
        .check([](const std::string& v) { return v.find_first_not_of("0123456789, ") == std::string::npos; },
               "expected class ids like 0,2", {"x"})
        .to(&S::classes);
    f->flag("save_txt", "label files of the predictions: not available in val (lucid predict save_txt=True)")
        .check([](const bool& v) { return !v; },
               "lucid val does not write label files; lucid predict save_txt=True writes them for the same images",
               {"True"})
        .to(&S::save_txt);
    f->flag("plots", "write curves, confusion matrices, val_batch images").to(&S::plots);
    f->flag("verbose", "per-class rows").to(&S::validator, &ValidatorOptions::verbose);
    f->flag("allow_outside_images",
            "follow COCO file_name paths that are absolute or lead out of the image folder (..)")
        .to(&S::index, &data::IndexOptions::allow_outside_images);
    config::declare_run_folder(*f, "run name (val, val2, ...)", &S::project, &S::name, &S::exist_ok);
    return f;
  }();
  return *list;
}

}  // namespace

int val_command(const std::vector<std::string>& args) { return val_run(args).exit_code; }

namespace {

// What is validated: a weights file's eager model, or an exported network (deploy/load_network.h:
// a TorchScript file, a compiled package, an ONNX file through the Python package) with the head and
// input size it was exported with.
struct ValModel {
  std::optional<engine::InferenceModel> weights;
  engine::LoadedNetwork exported;
  std::vector<std::string> names;  // the file's own; empty: none
  int64_t imgsz = 0, nc = 0;
  std::string data;  // the dataset recorded in a weights file
};

ValModel load_val_model(const ValSettings& s, const torch::Device& device) {
  ValModel m;
  if (engine::is_exported_network(s.model)) {
    m.exported = engine::load_network("model", s.model, device, /*amp=*/false);
    m.names = m.exported.names;
    m.imgsz = m.exported.imgsz;
    m.nc = m.exported.network->nc();
    if (m.exported.fixed_imgsz && s.imgsz > 0 && s.imgsz != m.imgsz)
      throw UserError("option imgsz=" + std::to_string(s.imgsz) + ": model=" + s.model +
                      " takes imgsz=" + std::to_string(m.imgsz) + " only (exported without dynamic=True)");
    return m;
  }
  m.weights = engine::load_inference_model("model", s.model, device);
  m.names = m.weights->source.names;
  m.imgsz = m.weights->source.imgsz;
  m.nc = m.weights->model->nc();
  m.data = m.weights->source.data;
  return m;
}

engine::ValResults run_validation(ValModel& m, const ValSettings& s, const torch::Device& device,
                                  const engine::PreparedSplit& prepared, engine::ValidatorOptions vo,
                                  const engine::EvaluateOptions& eo) {
  try {
    if (m.weights) return engine::evaluate(*m.weights->model, device, prepared, vo, eo, &std::cout);
    return engine::evaluate(*m.exported.network, m.exported.fixed_imgsz, prepared, vo, eo, &std::cout);
  } catch (const engine::NonFiniteOutputs& e) {
    throw UserError("model=" + s.model + ": " + e.what());
  }
}

}  // namespace

CommandOutcome val_run(const std::vector<std::string>& command_line) {
  const auto args = config::map_deprecated_end2end(command_line);
  auto options = val_fields().options();
  if (!options.parse_or_help(args)) return {};
  const auto settings = val_fields().read(options);
  const auto& checkpoint = settings.model;
  if (checkpoint.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  const auto& split_name = settings.split;
  if (!settings.classes.empty())
    std::fprintf(stderr,
                 "warning: classes=%s: validation scores every class (the reference's segment validator "
                 "ignores classes= too)\n",
                 settings.classes.c_str());
  const torch::Device device = util::parse_device(settings.device);
  if (device.is_cpu()) util::use_reference_cpu_threads();

  auto loaded = load_val_model(settings, device);
  const int imgsz = settings.imgsz > 0 ? static_cast<int>(settings.imgsz)
                    : loaded.imgsz > 0 ? static_cast<int>(loaded.imgsz)
                                       : 640;
  if (imgsz < 32 || imgsz % 32 != 0)
    throw UserError("option imgsz=" + std::to_string(imgsz) + ": expected a multiple of 32");
  std::string data_path = settings.data.empty() ? loaded.data : settings.data;
  if (data_path.empty() || data_path == data::default_synth_yaml()) data_path = default_dataset();

  data::IndexOptions io = settings.index;
  io.on_problem = [](const data::Problem& p) { std::fprintf(stderr, "warning: %s\n", p.str().c_str()); };
  auto index = data::build_index(data_path, io);
  const auto* split = index.find(split_name);
  if (!split) throw UserError(data_path + ": no '" + split_name + "' split");
  if (index.nc() != loaded.nc)
    throw UserError(data_path + ": " + std::to_string(index.nc()) + " classes, but " + checkpoint + " has " +
                    std::to_string(loaded.nc));
  // The model's class names, as the reference's validator prints them; the dataset's where it has none.
  const auto names = loaded.names.empty() ? index.names : loaded.names;

  auto run_dir = engine::make_run_dir(settings.project, settings.name, settings.exist_ok);
  fs::remove(run_dir / "weights");  // an empty folder from make_run_dir; validation writes no weights

  engine::ValidatorOptions vo = settings.validator;
  if (loaded.weights)
    config::warn_without_one_to_one(vo.nms, loaded.weights->model->end2end(), checkpoint);
  else if (vo.nms)
    std::fprintf(stderr, "warning: nms=%s: model=%s carries the head and NMS it was exported with\n",
                 *vo.nms ? "True" : "False", checkpoint.c_str());
  vo.speed = true;
  vo.names = names;
  engine::observe_validation(vo, run_dir.string(), /*training=*/false);  // the Python package's on_val_* callbacks
  vo.overlap_mask = loaded.weights ? loaded.weights->source.overlap_mask.value_or(true) : true;
  if (settings.save_json) {
    vo.save_json = (run_dir / "predictions.json").string();
    if (index.format == data::DatasetFormat::Coco) vo.class_map = index.category_ids;
  }
  engine::EvaluateOptions eo;
  eo.imgsz = imgsz;
  eo.batch = static_cast<int>(settings.batch);
  eo.workers = data::loader_workers(settings.workers, static_cast<int>(settings.batch), "val loader");
  eo.plots = settings.plots;
  eo.out_dir = run_dir.string();
  std::printf("lucid val: %s on %s split '%s' (%lld images), imgsz %d, device %s\n", checkpoint.c_str(),
              data_path.c_str(), split_name.c_str(), static_cast<long long>(split->images.size()), imgsz,
              device.str().c_str());
  auto prepared = engine::prepare_split(*split, imgsz, data::PreparedStore::Ram, 0);
  vo.refuse_non_finite = true;
  engine::ValResults r = run_validation(loaded, settings, device, prepared, vo, eo);

  report::ReportContent rc;
  rc.title = "lucid val: " + run_dir.string();
  rc.final = &r;
  rc.names = names;
  rc.summary = {{"model", checkpoint},
                {"data", data_path},
                {"split", split_name},
                {"imgsz", std::to_string(imgsz)},
                {"speed", engine::Validator(vo).format_speed(r.speed)}};
  report::write_report(run_dir.string(), rc);
  std::printf("Results saved to %s\n", run_dir.string().c_str());
  return CommandOutcome{0, run_dir.string(), names, std::move(r)};
}

config::Options val_options() { return val_fields().options(); }

}  // namespace lucid::cli
