// `lucid train`: the model (a YAML or any weights file, engine/model_source.h), dataset (or the
// embedded synthetic one), prepared images, loaders, validator and the fit. `resume=` continues a
// run from its weights/last checkpoint with the run's own options. Model, weights and device options
// are checked before any dataset work.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/data/synth.h"
#include "lucid/engine/checkpoint.h"
#include "lucid/engine/evaluate.h"
#include "lucid/engine/run_folder.h"
#include "lucid/engine/model_source.h"
#include "lucid/engine/trainer.h"
#include "lucid/engine/training_data.h"
#include "lucid/engine/validator.h"
#include "lucid/plot/annotate.h"
#include "lucid/plot/charts.h"
#include "lucid/report/run_report.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

}  // namespace

// The embedded default dataset: written once per seed into the cache folder.
std::string default_dataset() {
  const char* env = std::getenv("LUCID_CACHE_DIR");
  fs::path base = env && *env ? fs::path(env) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : ".") / ".cache" / "lucid";
  fs::path dir = base / "synth-v1";
  if (!fs::exists(dir / "data.yaml")) {
    data::SynthOptions so;
    so.out = dir.string();
    auto report = data::write_synth_dataset(so);
    std::printf("synthetic dataset: %lld images, %lld instances -> %s\n", static_cast<long long>(report.images),
                static_cast<long long>(report.instances), dir.string().c_str());
  }
  return (dir / "data.yaml").string();
}

namespace {

std::string newest_last_checkpoint(const std::string& project) {
  fs::path best;
  fs::file_time_type newest{};
  if (fs::exists(project))
    for (const auto& d : fs::directory_iterator(project)) {
      auto p = d.path() / "weights" / "last.safetensors";
      if (fs::exists(p) && (best.empty() || fs::last_write_time(p) > newest)) {
        best = p;
        newest = fs::last_write_time(p);
      }
    }
  if (best.empty()) throw UserError("resume=True: no weights/last.safetensors under " + project);
  return best.string();
}

// The model of a new run: model= (a YAML or a weights file) and pretrained= (True, False, or a
// weights file beside a YAML).
engine::ModelSource training_model(const engine::TrainSettings& s) {
  auto source = engine::read_model_source("model", s.model);
  const auto& p = s.pretrained;
  if (p == "False") {
    if (source.has_weights())
      std::printf("pretrained=False: training from scratch with the architecture of %s\n", s.model.c_str());
    source.weights.clear();
  } else if (p != "True") {
    if (source.has_weights())
      throw UserError("option pretrained=" + p + ": model=" + s.model + " already holds weights (" +
                      engine::kind_name(source.kind) + "); pretrained= goes beside a model YAML");
    auto weights = engine::read_model_source("pretrained", p);
    if (!weights.has_weights()) throw UserError("option pretrained=" + p + ": a model YAML holds no weights");
    source.weights = std::move(weights.weights);
  }
  source.require_spec();
  return source;
}

data::LoaderOptions loader_options(const engine::TrainSettings& s, int64_t size, bool train) {
  data::LoaderOptions o;
  o.dataset_size = size;
  o.imgsz = static_cast<int>(s.imgsz);
  o.batch = static_cast<int>(train ? s.batch : s.batch * 2);
  o.workers = data::loader_workers(train ? s.workers : std::min<int64_t>(s.workers * 2, 16), o.batch,
                                   train ? "train loader" : "val loader");
  o.augment = train;
  o.shuffle = train;
  o.rect = !train;
  o.overlap_mask = s.overlap_mask;
  o.seed = static_cast<uint64_t>(s.seed);
  o.aug.mosaic = s.mosaic;
  o.aug.degrees = s.degrees;
  o.aug.translate = s.translate;
  o.aug.scale = s.scale;
  o.aug.shear = s.shear;
  o.aug.perspective = s.perspective;
  o.aug.flipud = s.flipud;
  o.aug.fliplr = s.fliplr;
  o.aug.hsv_h = s.hsv_h;
  o.aug.hsv_s = s.hsv_s;
  o.aug.hsv_v = s.hsv_v;
  return o;
}

// The training batches, passed through; the first three of epoch 0 are also drawn with their labels
// into train_batch0..2.jpg, as the reference plots its first iterations.
class PlottedTrainBatches : public engine::BatchSource {
 public:
  PlottedTrainBatches(std::unique_ptr<engine::BatchSource> inner, std::string run_dir, std::vector<std::string> names,
                      bool overlap_mask)
      : inner_(std::move(inner)), names_(std::move(names)), overlap_mask_(overlap_mask), run_dir_(std::move(run_dir)) {}
  void set_run_dir(std::string dir) { run_dir_ = std::move(dir); }
  int64_t size() const override { return inner_->size(); }
  int64_t batches_per_epoch() const override { return inner_->batches_per_epoch(); }
  void start_epoch(int64_t epoch, bool mosaic) override {
    epoch_ = epoch;
    number_ = 0;
    inner_->start_epoch(epoch, mosaic);
  }
  std::optional<engine::TrainBatch> next() override {
    auto b = inner_->next();
    if (b && epoch_ == 0 && number_ < 3 && !run_dir_.empty()) {
      if (plot::available()) {
        const auto& t = b->targets;
        const int64_t bs = b->images.size(0), h = b->images.size(2), w = b->images.size(3);
        auto labels = plot::target_instances(t.batch_idx, t.cls, t.bboxes, t.masks, bs, h, w, overlap_mask_);
        plot::plot_image_grid(b->images.cpu(), labels, {}, names_,
                              (fs::path(run_dir_) / ("train_batch" + std::to_string(number_) + ".jpg")).string());
      } else {
        plot::skip_warning();
      }
    }
    ++number_;
    return b;
  }

 private:
  std::unique_ptr<engine::BatchSource> inner_;
  std::vector<std::string> names_;
  bool overlap_mask_;
  std::string run_dir_;
  int64_t epoch_ = -1, number_ = 0;
};

}  // namespace

int train_command(const std::vector<std::string>& args) {
  auto options = engine::train_options();
  if (!options.parse_or_help(args)) return 0;
  std::string resume;
  fs::path resume_dir;      // the resumed run's folder
  bool finishing = false;  // a finished fit whose final validation and report were not written
  engine::ModelSource model_source;
  if (!options.str("resume").empty() && options.str("resume") != "False") {
    resume = options.str("resume") == "True" ? newest_last_checkpoint(options.str("project")) : options.str("resume");
    // The run's own options, so it continues exactly as it started.
    auto state = engine::read_checkpoint_state(resume);
    engine::require_resumable(resume);
    resume_dir = engine::resume_run_dir(resume, state);
    engine::refuse_options_ignored_by_resume(options, state.args, resume_dir, resume);
    // The architecture stored in the checkpoint (its weights are restored by the trainer).
    model_source = engine::read_model_source("resume", resume, /*weights=*/false);
    std::vector<std::string> tokens;
    for (auto it = state.args.begin(); it != state.args.end(); ++it)
      if (it.key() != "resume") tokens.push_back(it.key() + "=" + it.value().get<std::string>());
    // How stages execute is not part of the checkpoint: the resuming command line chooses it.
    for (const auto& a : args)
      if (engine::execution_option(a.substr(0, a.find('=')))) tokens.push_back(a);
    options = engine::train_options();
    options.parse(tokens);
    const auto resumed = engine::TrainSettings::from(options);
    if (engine::fit_finished(state, resumed)) {
      // report.html is the run's last write: without it the fit's final validation is still due.
      if (fs::exists(resume_dir / "report.html")) throw engine::nothing_to_resume(resume, resumed);
      finishing = true;
    }
  }
  // The complete-fit clock (fit_report.json): before data, model and trainer construction.
  const auto fit_start = std::chrono::steady_clock::now();
  auto settings = engine::TrainSettings::from(options);
  // A rounded-up imgsz (warned once above) is the value the run records and uses from here on.
  if (options.given("imgsz")) options.parse({"imgsz=" + std::to_string(settings.imgsz)});
  const torch::Device device = util::parse_device(settings.device);
  if (resume.empty()) model_source = training_model(settings);
  const std::string data_path = settings.data.empty() ? default_dataset() : settings.data;
  data::IndexOptions io;
  io.allow_outside_images = options.flag("allow_outside_images");
  io.on_problem = [](const data::Problem& p) { std::fprintf(stderr, "warning: %s\n", p.str().c_str()); };
  auto index = data::build_index(data_path, io);
  const auto* train_split = index.find("train");
  const auto* val_split = index.find("val");
  if (!train_split) throw UserError(data_path + ": no 'train' split");
  if (!val_split) val_split = train_split;
  const bool disk = settings.cache == "disk";
  auto train = engine::prepare_split(*train_split, static_cast<int>(settings.imgsz), disk, 0);
  auto val = engine::prepare_split(*val_split, static_cast<int>(settings.imgsz), disk, 0);

  auto train_samples = engine::make_sample_source(train);
  auto train_opts = loader_options(settings, train.size(), true);
  if (settings.gpu_augment) train_opts.device_images = engine::upload_prepared(train_samples, train.size(), device);
  auto train_source = std::make_unique<engine::LoaderSource>(train_samples, train_opts);
  auto plotted = std::make_unique<PlottedTrainBatches>(std::move(train_source), "", index.names, settings.overlap_mask);
  auto* plotted_batches = settings.plots ? plotted.get() : nullptr;
  auto val_opts = loader_options(settings, val.size(), false);
  val_opts.image_sizes = engine::image_sizes(val);
  auto val_loader = std::make_shared<data::Loader>(engine::make_sample_source(val), val_opts);

  engine::ValidatorOptions vo;
  vo.names = index.names;
  vo.overlap_mask = settings.overlap_mask;
  vo.amp = settings.amp;
  vo.batches = val_loader->batches_per_epoch();
  auto validator = std::make_shared<engine::Validator>(vo);
  engine::Validate validate = [=](model::SegmentationModel& ema, loss::SegmentationLoss& loss) {
    val_loader->start_epoch(0);
    auto next = engine::val_batches(*val_loader, val);
    auto r = validator->run(*ema, device, next, &loss, &std::cout);
    engine::ValidationResult out;
    out.metrics = r.mean_results();
    for (size_t k = 0; k < out.losses.size() && k < r.losses.size(); ++k) out.losses[k] = r.losses[k];
    out.fitness = r.fitness();
    return out;
  };
  std::unique_ptr<engine::BatchSource> batches = std::move(plotted);
  std::unique_ptr<engine::Trainer> trainer;    // holds the run folder's lock to the end
  std::unique_ptr<engine::RunFolderLock> lock;  // or this, when only the final validation is due
  fs::path run_dir;
  if (finishing) {
    run_dir = resume_dir;
    lock = std::make_unique<engine::RunFolderLock>(run_dir);
    engine::remove_interrupted_writes(run_dir);
    std::printf("%s: training to %lld epochs is finished; writing its final validation and report\n", resume.c_str(),
                static_cast<long long>(settings.epochs));
  } else {
    engine::ModelStart start{
        model_source.spec_for_classes(static_cast<int>(index.nc())),
        model_source.weights.empty() ? nullptr : &model_source.weights};
    trainer = std::make_unique<engine::Trainer>(options, engine::DatasetInfo{index.nc(), index.names},
                                                std::move(start), std::move(batches), validate, resume);
    trainer->set_fit_start(fit_start);
    run_dir = trainer->run_dir();
    if (plotted_batches) plotted_batches->set_run_dir(run_dir.string());
    trainer->fit();
  }

  // Final validation of the best weights with plots, results.png and the report, as the reference's
  // final_eval.
  auto weights = run_dir / "weights" / "best.safetensors";
  if (!fs::exists(weights)) weights = run_dir / "weights" / "last.safetensors";
  std::printf("\nValidating %s...\n", weights.string().c_str());
  auto loaded = engine::load_inference_model("model", weights.string(), device);
  auto fo = vo;
  fo.verbose = true;
  fo.speed = true;
  engine::EvaluateOptions eo;
  eo.imgsz = static_cast<int>(settings.imgsz);
  eo.batch = val_opts.batch;
  eo.workers = val_opts.workers;
  eo.plots = settings.plots;
  eo.out_dir = run_dir.string();
  auto final_results = engine::evaluate(*loaded.model, device, val, fo, eo, &std::cout);
  if (settings.plots) {
    if (plot::available())
      plot::plot_results((run_dir / "results.csv").string(), (run_dir / "results.png").string());
    else
      plot::skip_warning();
  }
  report::ReportContent rc;
  rc.title = "lucid train: " + run_dir.string();
  rc.final = &final_results;
  rc.names = index.names;
  rc.summary = {{"data", data_path},
                {"model", settings.model},
                {"final validation", weights.string()},
                {"speed", engine::Validator(fo).format_speed(final_results.speed)}};
  report::write_report(run_dir.string(), rc);
  std::printf("Results saved to %s; weights %s\n", run_dir.string().c_str(), weights.string().c_str());
  return 0;
}

}  // namespace lucid::cli
