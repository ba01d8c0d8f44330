// `lucid train`: the model (a YAML or any weights file, weights/model_source.h), dataset (or the
// embedded synthetic one), prepared images, loaders, validator and the fit. `resume=` continues a
// run from its weights/last checkpoint with the run's own options. Model, weights and device options
// are checked before any dataset work.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/cli/outcome.h"
#include "lucid/config/cfg_file.h"
#include "lucid/config/nms_option.h"
#include "lucid/config/user_settings.h"
#include "lucid/data/synth.h"
#include "lucid/dist/launcher.h"
#include "lucid/dist/process_group.h"
#include "lucid/evaluate/evaluate.h"
#include "lucid/evaluate/validator.h"
#include "lucid/feed/training_data.h"
#include "lucid/loss/targets.h"
#include "lucid/plot/canvas.h"
#include "lucid/plot/charts.h"
#include "lucid/report/run_events.h"
#include "lucid/report/run_report.h"
#include "lucid/train/autobatch.h"
#include "lucid/train/device_warm_up.h"
#include "lucid/train/fit_events.h"
#include "lucid/train/resume.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/trainer.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/weights/checkpoint.h"
#include "lucid/weights/model_source.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

// Data parallel: starts the world (returns the launcher's exit status), or joins the one this
// process is a rank of (torchrun-style variables set), or does nothing for one process.
std::optional<int> start_or_join_world(const engine::TrainSettings& s, const std::vector<std::string>& args) {
  const auto member = dist::member_from_env();
  const auto plan = member ? std::nullopt : dist::world_plan(s.device, s.world);
  const int64_t world = member ? member->world : plan ? plan->world : 1;
  if (member && s.world > 1 && s.world != member->world)
    throw UserError("option world=" + std::to_string(s.world) +
                    ": this process is one of WORLD_SIZE=" + std::to_string(member->world) + " started by a launcher");
  if (world > 1 && s.batch_option.autobatch_fraction > 0)
    throw UserError(
        "option batch: AutoBatch (-1 or a fraction) measures one process's GPU memory and is not "
        "available with " +
        std::to_string(world) +
        " training processes (as in the reference); give "
        "the global batch as a count");
  if (world > 1 && s.batch() % world)
    throw UserError("option batch=" + std::to_string(s.batch()) + ": the global batch is split evenly over the " +
                    std::to_string(world) + " processes; use a multiple of " + std::to_string(world));
  if (plan) {
    std::vector<std::string> child{"train"};
    child.insert(child.end(), args.begin(), args.end());
    return dist::launch_world(*plan, child);
  }
  if (member)
    dist::join(*member, torch::Device(dist::rank_device(s.device, member->local_rank)),
               std::chrono::seconds(s.dist_timeout));
  return std::nullopt;
}

}  // namespace

std::string default_dataset() { return data::ensure_default_synth(); }

namespace {

// A new run without data=: weights that record their dataset train on it (as `lucid val` validates
// on it); otherwise the embedded synthetic dataset. The choice is printed either way.
void choose_default_data(config::Options& options) {
  const std::string model = options.str("model");
  const auto ext = fs::path(model).extension().string();
  const bool weights = ext != ".yaml" && ext != ".yml";
  const std::string recorded = weights ? engine::read_model_source("model", model, /*weights=*/false).data : "";
  if (recorded.empty() || recorded == data::default_synth_yaml()) {
    std::printf("data= not given: training on the embedded synthetic dataset (lucid data synth)%s\n",
                weights
                    ? (recorded.empty() ? ", which " + model + " does not name" : ", as " + model + " records").c_str()
                    : "");
    return;
  }
  if (!fs::exists(recorded))
    throw UserError("data= not given: " + model + " was trained on " + recorded + ", which is not found; give data=");
  std::printf("data= not given: training on %s, the dataset %s was trained on\n", recorded.c_str(), model.c_str());
  options.parse({"data=" + recorded});
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

// The training loader (augmented, shuffled) or the validation loader (letterboxed rect batches of
// twice the batch, as the reference's), from the run's loader options.
data::LoaderOptions loader_options(const engine::TrainSettings& s, int64_t size, bool train) {
  data::LoaderOptions o = s.loader;
  o.dataset_size = size;
  if (!train) o.batch *= 2;
  o.workers = data::loader_workers(train ? o.workers : std::min(o.workers * 2, 16), o.batch,
                                   train ? "train loader" : "val loader");
  o.augment = train;
  // rect training: batches in aspect order at their own shapes, unpadded, no shuffling or mosaic
  // (the reference's training dataset with rect=True); validation batches are always rect.
  o.shuffle = train && !s.loader.rect;
  o.rect = !train || s.loader.rect;
  o.rect_pad = train ? 0.0 : 0.5;
  if (s.loader.rect) o.aug.mosaic = 0.0;
  return o;
}

}  // namespace

namespace {

// The dataset of a fit: its index, the prepared training and validation splits, and the
// training instances per class (cls_pw) and at most in one image (AutoBatch).
struct FitData {
  std::string path;
  data::DatasetIndex index;
  engine::PreparedSplit train, val;
  std::vector<int64_t> class_counts;
  int64_t max_instances = 0;
  int64_t capacity_floor = 0;  // loss::capacity_floor of the usable training images
};

// The dataset's index and its splits, the RAM cache's size checked; the images are prepared after.
FitData index_fit_data(const engine::TrainSettings& settings) {
  FitData d;
  d.path = settings.synthetic ? default_dataset() : settings.data;
  data::IndexOptions io = settings.index;
  if (settings.index.single_cls) std::printf("Overriding class names with single class.\n");
  io.on_problem = [](const data::Problem& p) { std::fprintf(stderr, "warning: %s\n", p.str().c_str()); };
  d.index = data::build_index(d.path, io);
  const auto* train_split = d.index.find("train");
  const auto* val_split = d.index.find(settings.split);
  if (!train_split) throw UserError(d.path + ": no 'train' split");
  if (!val_split && settings.split == "test") throw UserError("option split=test: " + d.path + " has no 'test' split");
  if (!val_split) val_split = train_split;
  if (engine::prepared_store(settings.cache) == data::PreparedStore::Ram)
    engine::require_memory_for_ram_cache({train_split, val_split}, static_cast<int>(settings.imgsz()));
  return d;
}

// The prepared training and validation images (decoded, resized, cached), and the instance counts
// that come with the usable ones. Writes d's splits and counts only: its index may be read meanwhile.
void prepare_fit_data(const engine::TrainSettings& settings, FitData& d) {
  const auto* train_split = d.index.find("train");
  const auto* val_split = d.index.find(settings.split);
  if (!val_split) val_split = train_split;
  const auto store = engine::prepared_store(settings.cache);
  const int imgsz = static_cast<int>(settings.imgsz());
  d.train = engine::prepare_split(*train_split, imgsz, store, 0);
  d.val = engine::prepare_split(*val_split, imgsz, store, 0);
  d.class_counts.assign(static_cast<size_t>(d.index.nc()), 0);
  std::vector<int64_t> per_image;
  for (const auto u : d.train.usable) {
    int64_t n = 0;
    for (const auto& inst : d.train.split->images[static_cast<size_t>(u)].instances)
      if (!inst.crowd) ++d.class_counts[static_cast<size_t>(inst.cls)], ++n;
    d.max_instances = std::max(d.max_instances, n);
    per_image.push_back(n);
  }
  d.capacity_floor = loss::capacity_floor(std::move(per_image));
}

// A fit on one GPU at one input size sets the device up for its training shapes
// (train/device_warm_up.h) on this thread while another prepares the images.
FitData load_fit_data(const engine::TrainSettings& settings, const engine::ModelSource& model, torch::Device device,
                      bool warm_up) {
  FitData d = index_fit_data(settings);
  const bool fixed_shapes =
      !settings.loader.rect && settings.multi_scale == 0 && settings.batch_option.autobatch_fraction <= 0;
  if (!(warm_up && device.is_cuda() && fixed_shapes)) {
    prepare_fit_data(settings, d);
    return d;
  }
  auto prepared = std::async(std::launch::async, [&] { prepare_fit_data(settings, d); });
  engine::WarmUpRequest r;
  r.spec = model.spec_for_classes(static_cast<int>(d.index.nc()));
  r.device = device;
  r.imgsz = settings.imgsz();
  const auto train_images = static_cast<int64_t>(d.index.find("train")->images.size());
  r.batches = engine::epoch_batch_sizes(train_images, settings.batch());
  r.autocast = settings.amp;
  r.deterministic = settings.deterministic;
  std::future<data::PinnedReservation> pinned;
  if (settings.loader.pin_memory != 0 && !settings.execution.gpu_augment) {
    auto o = settings.loader;
    o.dataset_size = train_images;
    o.workers = data::loader_workers(o.workers, o.batch, nullptr);
    pinned = std::async(std::launch::async, [o, &r] { return data::reserve_pinned_batches(o, r.batches); });
  }
  const double seconds = engine::warm_up_device(r);
  prepared.get();
  std::ostringstream batches, pins;
  for (const auto b : r.batches) batches << (batches.tellp() ? " and " : "") << b;
  if (pinned.valid()) {
    const auto p = pinned.get();
    pins << ", and " << p.bytes / (1 << 20) << " MiB of host memory was pinned for " << p.batches << " batches in "
         << std::fixed << std::setprecision(2) << p.seconds << " s";
  }
  std::printf("device: set up for training batches of %s at %lld px in %.2f s, while the images were prepared%s\n",
              batches.str().c_str(), static_cast<long long>(r.imgsz), seconds, pins.str().c_str());
  return d;
}

// batch=-1 or a fraction: AutoBatch on the device; the chosen batch is the run's (args.yaml,
// checkpoints and a resume carry it).
void choose_batch(engine::TrainSettings& settings, const engine::ModelSource& model, const FitData& d,
                  torch::Device device) {
  if (settings.batch_option.autobatch_fraction <= 0) return;
  engine::AutoBatchRequest ab;
  ab.spec = model.spec_for_classes(static_cast<int>(d.index.nc()));
  ab.device = device;
  ab.imgsz =
      static_cast<int64_t>(std::ceil(static_cast<double>(settings.imgsz()) * (1.0 + settings.multi_scale) / 32.0)) * 32;
  ab.fraction = settings.batch_option.autobatch_fraction;
  ab.amp = device.is_cuda() && settings.amp;
  ab.max_num_obj = d.max_instances * 4;  // 4 for mosaic, as the reference
  ab.dataset_size = d.train.size();
  settings.set_batch(engine::auto_batch(ab));
}

// The reference warns here (8.4.190 _build_train_pipeline); a batch of one image at 32 px gives
// BatchNorm one value per channel and the step fails, so it is refused before training.
void refuse_single_image_batch(const engine::TrainSettings& settings, int64_t train_size) {
  const int64_t batch = settings.batch();
  const int64_t final_batch = train_size % batch ? train_size % batch : batch;
  const int64_t min_imgsz =
      std::max<int64_t>(32, static_cast<int64_t>(static_cast<double>(settings.imgsz()) * (1 - settings.multi_scale))) /
      32 * 32;
  if (min_imgsz < 64 && final_batch == 1)
    throw UserError("option batch=" + std::to_string(batch) + ": the last batch of the " + std::to_string(train_size) +
                    " training images holds one image, and training at imgsz=" + std::to_string(min_imgsz) +
                    " gives BatchNorm a single value per channel; change batch, or use imgsz and multi_scale that keep "
                    "every size >= 64");
}

// A GPU fit's loader workers yield to the fit's thread (data::LoaderOptions::worker_nice): at nice 10
// a worker gets about a tenth of a core the fit's thread wants, and all of one it leaves.
constexpr int kGpuFitWorkerNice = 10;

// The training batches: sharded across the world's processes, rect sizes, GPU-rendered images.
std::unique_ptr<engine::BatchSource> training_batches(const engine::TrainSettings& settings, const FitData& d,
                                                      const dist::World* world, torch::Device device) {
  auto samples = engine::make_sample_source(d.train);
  auto opts = loader_options(settings, d.train.size(), true);
  if (world) {
    const int64_t last = d.train.size() % settings.batch();
    if (last > 0 && last < world->size())
      throw UserError(d.path + ": the last batch of the epoch holds " + std::to_string(last) +
                      " images, fewer than the " + std::to_string(world->size()) +
                      " processes; change batch so that every process gets one");
    opts.shard = world->rank();
    opts.shards = world->size();
  }
  if (settings.loader.rect) {
    opts.image_sizes = engine::image_sizes(d.train);
    std::fprintf(stderr, "warning: 'rect=True' is incompatible with DataLoader shuffle, setting shuffle=False\n");
  }
  if (settings.execution.gpu_augment) opts.device_images = engine::upload_prepared(samples, d.train.size(), device);
  if (device.is_cuda()) opts.worker_nice = kGpuFitWorkerNice;
  return std::make_unique<engine::LoaderSource>(samples, opts);
}

// The validation split's loader and the validator's options, shared by the validation after each
// epoch and the final one.
struct FitValidation {
  data::LoaderOptions loader_options;
  std::shared_ptr<data::Loader> loader;
  engine::ValidatorOptions validator;
};

FitValidation fit_validation(const engine::TrainSettings& settings, const FitData& d) {
  FitValidation v;
  v.loader_options = loader_options(settings, d.val.size(), false);
  v.loader_options.image_sizes = engine::image_sizes(d.val);
  v.loader = std::make_shared<data::Loader>(engine::make_sample_source(d.val), v.loader_options);
  v.validator = settings.validator;
  v.validator.names = d.index.names;
  v.validator.batches = v.loader->batches_per_epoch();
  return v;
}

// Validation after each epoch: the EMA model on the validation split, with the training loss.
engine::Validate epoch_validation(const FitValidation& v, const engine::PreparedSplit& val, torch::Device device) {
  auto options = v.validator;
  engine::observe_validation(options, "", /*training=*/true);  // the Python package's on_val_* callbacks
  auto validator = std::make_shared<engine::Validator>(options);
  return [=, loader = v.loader](model::SegmentationModel& ema, loss::SegmentationLoss& loss) {
    loader->start_epoch(0);
    auto next = engine::val_batches(*loader, val);
    auto r = validator->run(*ema, device, next, &loss, &std::cout);
    engine::ValidationResult out;
    out.metrics = r.mean_results();
    for (size_t k = 0; k < out.losses.size() && k < r.losses.size(); ++k) out.losses[k] = r.losses[k];
    out.fitness = r.fitness();
    return out;
  };
}

// After the fit, as the reference's final_eval: the best weights validated with plots, results.png,
// the plots as TensorBoard images, report.html, and the observer's on_train_end.
CommandOutcome final_evaluation(const engine::TrainSettings& settings, const FitData& d, const FitValidation& v,
                                const fs::path& run_dir, torch::Device device, engine::Trainer* trainer) {
  auto weights = run_dir / "weights" / "best.safetensors";
  if (!fs::exists(weights)) weights = run_dir / "weights" / "last.safetensors";
  std::printf("\nValidating %s...\n", weights.string().c_str());
  auto loaded = engine::load_inference_model("model", weights.string(), device);
  auto fo = v.validator;
  engine::observe_validation(fo, run_dir.string(), /*training=*/false);
  fo.verbose = settings.verbose;
  fo.speed = true;
  if (settings.save_json) {
    // As the reference's final_eval: the results of the best weights, in the run folder.
    fo.save_json = (run_dir / "predictions.json").string();
    if (d.index.format == data::DatasetFormat::Coco) fo.class_map = d.index.category_ids;
  }
  engine::EvaluateOptions eo;
  eo.imgsz = static_cast<int>(settings.imgsz());
  eo.batch = v.loader_options.batch;
  eo.workers = v.loader_options.workers;
  eo.plots = settings.plots;
  eo.out_dir = run_dir.string();
  auto final_results = engine::evaluate(*loaded.model, device, d.val, fo, eo, &std::cout);
  if (settings.plots) {
    if (plot::available())
      plot::plot_results((run_dir / "results.csv").string(), (run_dir / "results.png").string());
    else
      plot::skip_warning();
  }
  // The plots as TensorBoard images, at the run's last epoch (a run only finishing its report opens
  // a new event file for them).
  if (settings.tensorboard) {
    std::unique_ptr<report::EventFile> own;
    auto* events = trainer ? trainer->events() : nullptr;
    if (!events) events = (own = std::make_unique<report::EventFile>(run_dir)).get();
    const auto trained = engine::read_checkpoint_state((run_dir / "weights" / "last.safetensors").string()).epoch;
    report::log_run_plots(*events, run_dir, trained);
  }
  report::ReportContent rc;
  rc.title = "lucid train: " + run_dir.string();
  rc.final = &final_results;
  rc.names = d.index.names;
  rc.summary = {{"data", d.path},
                {"model", settings.model},
                {"epochs", std::to_string(settings.epochs)},
                {"imgsz", std::to_string(settings.imgsz())},
                {"batch", std::to_string(settings.batch())},
                {"device", settings.device},
                {"final validation", weights.string()},
                {"speed", engine::Validator(fo).format_speed(final_results.speed)}};
  report::write_report(run_dir.string(), rc);
  std::printf("Results saved to %s; weights %s\n", run_dir.string().c_str(), weights.string().c_str());
  if (auto* observer = engine::fit_observer()) {
    // As the reference after its final validation: on_fit_epoch_end with its metrics at the epoch
    // after the last (training=false: no validation losses), then on_train_end.
    engine::FitEvent end;
    end.kind = engine::FitEventKind::FitEpochEnd;
    end.epoch = engine::read_checkpoint_state((run_dir / "weights" / "last.safetensors").string()).epoch;
    end.epochs = settings.epochs;
    end.metrics = final_results.mean_results();
    end.fitness = final_results.fitness();
    end.validated = true;
    end.training = false;
    end.run_dir = run_dir.string();
    observer->on_event(end);
    end.kind = engine::FitEventKind::TrainEnd;
    end.epoch = settings.epochs;
    observer->on_event(end);
  }
  return CommandOutcome{0, run_dir.string(), d.index.names, std::move(final_results)};
}

}  // namespace

int train_command(const std::vector<std::string>& args) { return train_run(args).exit_code; }

CommandOutcome train_run(const std::vector<std::string>& command_line) {
  const auto args = config::map_deprecated_end2end(command_line);
  auto options = engine::train_options();
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) return options.parse_or_help(args), CommandOutcome{};
  config::parse_with_cfg_file(options, args, [](const config::Options& o) { engine::TrainSettings::from(o); });
  engine::ResumedRun resumed = engine::read_resume(options);
  auto& settings = resumed.settings;
  const bool resuming = !resumed.checkpoint.empty();
  // The complete-fit clock (fit_report.json): before data, model and trainer construction.
  const auto fit_start = std::chrono::steady_clock::now();
  if (!resuming && !options.given("data")) choose_default_data(options);
  if (!resuming) settings = engine::TrainSettings::from(options);
  if (settings.save_pt) require_pt_writer("save_pt=True");
  engine::refuse_control_characters(engine::train_record(settings, engine::RecordScope::ArgsYaml));
  if (const auto launched = start_or_join_world(settings, args)) {
    CommandOutcome launcher;
    launcher.exit_code = *launched;
    return launcher;
  }
  const auto* world = dist::world();
  const torch::Device device = world ? world->device() : util::parse_device(settings.device);
  if (!resuming) resumed.model = training_model(settings);
  const auto& model_source = resumed.model;
  config::warn_without_one_to_one(settings.validator.nms, model_source.require_spec().end2end, settings.model);
  const FitData data = load_fit_data(settings, model_source, device, !world && !resumed.finishing);
  choose_batch(settings, model_source, data, device);
  refuse_single_image_batch(settings, data.train.size());
  auto batches = training_batches(settings, data, world, device);
  const auto validation = fit_validation(settings, data);
  const auto validate = epoch_validation(validation, data.val, device);
  std::unique_ptr<engine::Trainer> trainer;     // holds the run folder's lock to the end
  std::unique_ptr<engine::RunFolderLock> lock;  // or this, when only the final validation is due
  fs::path run_dir;
  if (resumed.finishing && !dist::primary()) return {};  // only the final validation is due: rank 0's
  if (resumed.finishing) {
    run_dir = resumed.run_dir;
    lock = std::make_unique<engine::RunFolderLock>(run_dir);
    engine::remove_interrupted_writes(run_dir);
    std::printf("%s: training to %lld epochs is finished; writing its final validation and report\n",
                resumed.checkpoint.c_str(), static_cast<long long>(settings.epochs));
  } else {
    engine::ModelStart start{model_source.spec_for_classes(static_cast<int>(data.index.nc())),
                             model_source.weights.empty() ? nullptr : &model_source.weights};
    trainer = std::make_unique<engine::Trainer>(
        settings, engine::DatasetInfo{data.index.nc(), data.index.names, data.class_counts, data.capacity_floor},
        std::move(start), std::move(batches), validate, resumed.checkpoint.empty() ? nullptr : &resumed);
    trainer->set_fit_start(fit_start);
    run_dir = trainer->run_dir();
    if (auto* observer = engine::fit_observer()) {
      // on_pretrain_routine_start once the run folder exists (the package's loggers write into it).
      engine::FitEvent start;
      start.kind = engine::FitEventKind::PretrainRoutineStart;
      start.epochs = settings.epochs;
      start.run_dir = run_dir.string();
      observer->on_event(start);
    }
    trainer->fit();
  }
  if (!dist::primary()) return {};                       // rank 0 validates the final weights and writes the report
  if (settings.save_pt) write_run_pt(run_dir.string());  // before on_train_end, as the reference's .pt
  return final_evaluation(settings, data, validation, run_dir, device, trainer.get());
}

}  // namespace lucid::cli
