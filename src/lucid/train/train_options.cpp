#include "lucid/train/train_options.h"

#include <cmath>
#include <limits>

#include "lucid/config/nms_fields.h"
#include "lucid/config/nms_option.h"
#include "lucid/config/user_settings.h"
#include "lucid/data/fraction.h"
#include "lucid/data/synth.h"
#include "lucid/train/freeze.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

namespace {

using S = TrainSettings;
using config::Role;
using data::AugmentOptions;
using data::LoaderOptions;
using loss::LossOptions;
using optim::ScheduleOptions;
constexpr long long kInt = std::numeric_limits<int>::max();

// batch=: a count from 1 to kMaxBatch, -1 (AutoBatch at the reference's 60%) or a GPU memory fraction in (0, 1).
BatchOption parse_batch(const std::string& key, const std::string& text) {
  const double b = config::read_number(key, text);
  if (b == -1) return {0, 0.6};
  if (b > 0 && b < 1) return {0, b};
  if (b != std::floor(b) || b < 1 || b > static_cast<double>(config::kMaxBatch))
    throw UserError("option " + key + "=" + text + ": expected a count from 1 to " + std::to_string(config::kMaxBatch) +
                    ", -1 (AutoBatch) or a GPU memory fraction in (0, 1)");
  return {static_cast<int64_t>(b), 0};
}

std::string format_batch(const BatchOption& b) {
  return b.autobatch_fraction > 0 ? config::format_number(b.autobatch_fraction) : std::to_string(b.count);
}

// The run's inputs: dataset, model, weights, options file, length and input size.
void declare_inputs(config::FieldList<S>& f) {
  f.text("data", "",
         "dataset YAML or COCO JSON (default: the embedded synthetic dataset); recorded as an absolute path")
      .resolve([](const S&) { return data::default_synth_yaml(); })
      .adjust([](const S&, std::string v) { return absolute_dataset(v); })
      .to(&S::data)
      .also([](S& s, const std::string& v) { s.synthetic = v == data::default_synth_yaml(); });
  f.text("model",
         "model YAML (scale letter picks the scale), or a weights file to start from: an Ultralytics .pt, "
         "lucid weights (.safetensors) or a lucid training checkpoint (its EMA weights, a new run)")
      .to(&S::model);
  f.text("pretrained",
         "a weights file (.pt, .safetensors) to transfer into model=YAML; False: the file given as model= "
         "gives only the architecture")
      .to(&S::pretrained);
  f.text("cfg", "", "a YAML file of options (key: value); options on the command line win over it (None: no file)")
      .resolve([](const S&) { return std::string("None"); })
      .role(Role::Location)
      .to(&S::cfg);
  f.integer("epochs", "", "epochs to train (default 100; 30 for the synthetic dataset); with resume=, the new total")
      .range(1, 1000000)
      .resolve([](const S& s) { return s.synthetic ? 30LL : 100LL; })
      .role(Role::Adjustable)
      .to(&S::epochs)
      .to(&S::schedule, &ScheduleOptions::epochs)
      .to(&S::loss, &LossOptions::epochs);
  f.number(
       "time", "",
       "hours to train, overriding epochs (default 0: off): after each epoch epochs = ceil(time * 3600 / mean epoch "
       "time) and the schedule is stretched to it; training also stops once the time is up; with resume=, "
       "the new budget")
      .min(0)
      .resolve([](const S&) { return 0.0; })
      .role(Role::Adjustable)
      .to(&S::time);
  // [h, w] trains at the larger side, with a warning, as the reference's trainer (a square: mosaic and
  // the letterbox make square batches).
  f.value<long long>(
       "imgsz", "",
       "training image size, rounded up to a multiple of 32 (default 640; 160 for the synthetic dataset); of "
       "[h, w] the larger side, as the reference",
       [](const std::string& key, const std::string& text) {
         return config::one_imgsz(key, text, config::ImgszLists::LargerSide, "train");
       },
       [](const long long& v) { return std::to_string(v); },
       {"0", "1.5", "x", "[1,2,3]", std::to_string(config::kMaxImgsz + 1)})
      .resolve([](const S& s) { return static_cast<long long>(default_train_imgsz(s.synthetic)); })
      .adjust([](const S&, long long v) { return config::stride_multiple(v); })
      .to(&S::loader, &LoaderOptions::imgsz);
  f.value<BatchOption>("batch", "",
                       "images per batch (default 16; 8 for the synthetic dataset); -1: AutoBatch at 60% of the GPU "
                       "memory, a fraction in (0, 1): AutoBatch at that fraction (on the CPU: 16, with a warning); "
                       "recorded as the batch chosen",
                       parse_batch, format_batch, {"0", "-2", "1.5", "x", std::to_string(config::kMaxBatch + 1)})
      .resolve([](const S& s) {
        return BatchOption{s.synthetic ? 8 : 16, 0};
      })
      .to(&S::batch_option)
      .also([](S& s, const BatchOption& b) {
        s.loader.batch = static_cast<int>(b.count);
        s.schedule.batch = b.count;
      });
  f.text("fraction",
         "part of the training images to use, the first of the sorted list: a ratio in (0, 1], a count > 1, or "
         "[train,val] / [train,val,test] ratios or counts")
      .refuses({"0", "1.5", "x", "[0,0]"})
      .to(&S::fraction)
      .also([](S& s, const std::string& v) { s.index.fraction = data::DatasetFraction::parse(v); });
  f.flag("single_cls", "train every class as one class, 'item'")
      .to(&S::index, &data::IndexOptions::single_cls)
      .to(&S::validator, &ValidatorOptions::single_cls);
  f.flag("rect",
         "rectangular training batches: images sorted by aspect ratio, each batch at its own shape; mosaic off "
         "and no shuffling")
      .to(&S::loader, &LoaderOptions::rect);
  f.number("multi_scale",
           "per-batch random input size in [imgsz * (1 - m), imgsz * (1 + m)], a multiple of 32 (0: off)")
      .fraction()
      .to(&S::multi_scale);
  f.integer("mask_ratio", "mask target downsample ratio")
      .range(1, kInt)
      // Every batch shape (a multiple of the stride 32, also with rect and multi_scale) must divide into mask pixels.
      .check([](const long long& v) { return 32 % v == 0; }, "must divide the stride 32: 1, 2, 4, 8, 16 or 32", {"3"})
      .to(&S::loader, &LoaderOptions::mask_ratio);
  f.number("cls_pw",
           "class-weight power: inverse class frequencies of the training labels raised to it weight the class "
           "loss (0: off, 1: full inverse frequency)")
      .fraction()
      .to(&S::cls_pw);
  f.number("dropout", "classification-head dropout (classify models only; accepted, no effect on segmentation)")
      .fraction()
      .to(&S::dropout);
}

// Where the fit runs and how its data is read and held.
void declare_devices_and_data(config::FieldList<S>& f) {
  f.text("device", "",
         "cpu, cuda, cuda:N, N, or GPUs 0,1,... for one training process each (default: cuda:0 if usable, else cpu); "
         "with resume=, where it goes on")
      .resolve([](const S&) { return util::device_name(""); })
      // GPUs 0,1,... (one training process each, dist/launcher.h) are kept as given.
      .adjust([](const S&, std::string v) { return v.find(',') != std::string::npos ? v : util::device_name(v); })
      .refuses({"gpu"})
      .role(Role::Adjustable)
      .to(&S::device);
  f.integer("world",
            "training processes on this host for device=cpu (data parallel over Gloo; batch is the global batch)")
      .range(1, 4096)
      .to(&S::world);
  f.flag("sync_bn", "data parallel: BatchNorm statistics over the global batch").to(&S::sync_bn);
  f.integer("dist_timeout", "data parallel: seconds any collective waits for the other ranks before the run stops")
      .range(1, 7 * 24 * 3600)
      .role(Role::Execution)
      .to(&S::dist_timeout);
  f.integer("workers", "data loader worker threads (at most one per CPU and per image of a batch)")
      .range(0, kInt)
      .to(&S::loader, &LoaderOptions::workers);
  f.choice("cache", "prepared-image cache: ram, disk or False", {"ram", "disk", "True", "False"}).to(&S::cache);
  f.flag("allow_outside_images", "follow COCO file_name paths that are absolute or lead out of the image folder (..)")
      .to(&S::index, &data::IndexOptions::allow_outside_images);
  f.flag("gpu_augment",
         "render the augmented training images (mosaic, perspective, flips) on the training device from the "
         "prepared images held in its memory (same bytes as the workers' CPU path)")
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::gpu_augment);
}

// The optimizer, its schedule and the loss gains.
void declare_optimization(config::FieldList<S>& f) {
  f.choice("optimizer", "auto, SGD, MuSGD, AdamW, Adam, Adamax, NAdam, RAdam or RMSprop",
           {"auto", "SGD", "AdamW", "MuSGD", "Adam", "Adamax", "NAdam", "RAdam", "RMSprop"})
      .to(&S::optimizer, &OptimizerSettings::name);
  f.integer("seed", "random seed")
      .range(0, std::numeric_limits<long long>::max())
      .to(&S::seed)
      .to(&S::loader, &LoaderOptions::seed);
  f.flag("deterministic", "deterministic algorithms").to(&S::deterministic);
  f.number("lr0", "initial learning rate (ignored by optimizer=auto)")
      .min(0, /*open=*/true)
      .max(1)
      .to(&S::optimizer, &OptimizerSettings::lr0);
  f.number("lrf", "final learning rate as a fraction of lr0")
      .min(0, /*open=*/true)
      .max(1)
      .to(&S::schedule, &ScheduleOptions::lrf);
  f.number("momentum", "SGD momentum / Adam beta1 (ignored by optimizer=auto)")
      .min(0)
      .max(1, /*open=*/true)
      .to(&S::optimizer, &OptimizerSettings::momentum)
      .to(&S::schedule, &ScheduleOptions::momentum);
  f.number("weight_decay", "weight decay at the nominal batch size")
      .fraction()
      .to(&S::optimizer, &OptimizerSettings::weight_decay);
  f.number("warmup_epochs", "warmup epochs (fractions allowed)")
      .min(0)
      .to(&S::schedule, &ScheduleOptions::warmup_epochs);
  f.number("warmup_momentum", "initial warmup momentum").fraction().to(&S::schedule, &ScheduleOptions::warmup_momentum);
  f.number("warmup_bias_lr", "initial warmup learning rate of biases")
      .fraction()
      .to(&S::schedule, &ScheduleOptions::warmup_bias_lr);
  f.flag("cos_lr", "cosine learning-rate schedule").to(&S::schedule, &ScheduleOptions::cos_lr);
  f.integer("nbs", "nominal batch size (gradient accumulation)")
      .range(1, config::kMaxBatch)
      .to(&S::optimizer, &OptimizerSettings::nbs)
      .to(&S::schedule, &ScheduleOptions::nbs);
  f.number("box", "box (and mask, semantic) loss gain").min(0).to(&S::loss, &LossOptions::box);
  f.number("cls", "class loss gain").min(0).to(&S::loss, &LossOptions::cls);
  f.number("dfl", "DFL / L1 loss gain").min(0).to(&S::loss, &LossOptions::dfl);
  f.flag("overlap_mask", "one overlap mask per image (False: one mask per instance)")
      .to(&S::loader, &LoaderOptions::overlap_mask)
      .to(&S::loss, &LossOptions::overlap_mask)
      .to(&S::validator, &ValidatorOptions::overlap_mask);
}

// The training images' augmentation and the frozen layers.
void declare_augmentation(config::FieldList<S>& f) {
  f.integer("close_mosaic", "turn mosaic off for the last N epochs (epoch >= epochs - N)")
      .range(0, kInt)
      .to(&S::close_mosaic);
  f.number("mosaic", "mosaic probability").fraction().to(&S::loader, &LoaderOptions::aug, &AugmentOptions::mosaic);
  f.number("mixup", "MixUp probability: blend with a second augmented image, weight Beta(32, 32)")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::mixup);
  f.number("cutmix", "CutMix probability: a rectangle free of boxes taken from a second augmented image")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::cutmix);
  f.number("copy_paste", "fraction of the eligible instances pasted (mode mixup: also the probability)")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::copy_paste);
  f.choice("copy_paste_mode", "copy_paste source: flip (the image's own instances mirrored) or mixup (another image's)",
           {"flip", "mixup"})
      .to(&S::copy_paste_mode)
      .also([](S& s, const std::string& v) {
        s.loader.aug.copy_paste_mode = v == "mixup" ? data::CopyPasteMode::MixUp : data::CopyPasteMode::Flip;
      });
  f.number("hsv_h", "HSV hue gain").fraction().to(&S::loader, &LoaderOptions::aug, &AugmentOptions::hsv_h);
  f.number("hsv_s", "HSV saturation gain").fraction().to(&S::loader, &LoaderOptions::aug, &AugmentOptions::hsv_s);
  f.number("hsv_v", "HSV value gain").fraction().to(&S::loader, &LoaderOptions::aug, &AugmentOptions::hsv_v);
  f.number("degrees", "rotation (+/- degrees)").to(&S::loader, &LoaderOptions::aug, &AugmentOptions::degrees);
  f.number("translate", "translation (+/- fraction)")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::translate);
  f.number("scale", "scale gain (+/-)").fraction().to(&S::loader, &LoaderOptions::aug, &AugmentOptions::scale);
  f.number("shear", "shear (+/- degrees)").to(&S::loader, &LoaderOptions::aug, &AugmentOptions::shear);
  f.number("perspective", "perspective (+/- fraction)")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::perspective);
  f.number("flipud", "vertical flip probability")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::flipud);
  f.number("fliplr", "horizontal flip probability")
      .fraction()
      .to(&S::loader, &LoaderOptions::aug, &AugmentOptions::fliplr);
  f.text("freeze", "freeze the first N layers, or a comma-separated list of layer indices (None: no layer)")
      .resolve([](const S&) { return std::string("None"); })
      .refuses({"1,x", "1,"})
      .to(&S::freeze)
      .also([](S& s, const std::string& v) { s.frozen = parse_freeze(v); });
}

// How the steps execute (precision, recordings, clocks): never what they compute.
void declare_execution(config::FieldList<S>& f) {
  f.flag("amp", "BF16 autocast on CUDA").to(&S::amp).to(&S::validator, &ValidatorOptions::amp);
  f.flag("capture_network", "replay the shared features (backbone + neck) as recorded CUDA graphs")
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::replay, &replay::ReplayOptions::network);
  f.flag("capture_segment_heads", "replay each head prediction as its own recorded CUDA graph")
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::replay, &replay::ReplayOptions::heads);
  f.flag("capture_optimizer", "replay the optimizer's update preparation and orthogonalisation")
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::replay, &replay::ReplayOptions::optimizer);
  // On by default: a fit on one CUDA device replays its whole step unless the user turns it off or
  // asks for the stage recordings instead; where it cannot hold, route() says why and the step runs
  // natively. Declared after the stage options, whose values its default reads.
  f.flag(
       "capture_step", "",
       "replay the whole training step (forward, loss, backward; clipping, optimizer and EMA) as recorded CUDA graphs "
       "(default True unless a capture_network/capture_segment_heads/capture_optimizer option is on)")
      .resolve([](const S& s) { return !s.execution.replay.stages(); })
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::replay, &replay::ReplayOptions::step);
  f.flag("stage_times", "time every stage (host and device) over the fit; printed and in fit_report.json")
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::stage_times);
  f.integer("kernel_times",
            "profile the CUDA kernels of this many training steps from the second epoch on (the first if only one) "
            "and charge their device time to the stages; the costliest printed, every kernel in fit_report.json")
      .range(0, 100000)
      .role(Role::Execution)
      .to(&S::execution, &ExecutionSettings::kernel_times);
}

// Validation during the fit, early stopping, and what the run writes where.
void declare_validation_and_outputs(config::FieldList<S>& f) {
  f.flag("val", "validate after every epoch").to(&S::val);
  f.choice("split", "split validated during and after training: val or test", {"val", "test"}).to(&S::split);
  f.number("conf", "", "validation confidence threshold (default 0.001)")
      .fraction()
      .resolve([](const S&) { return 0.001; })
      .to(&S::validator, &ValidatorOptions::conf);
  config::declare_nms_fields<ValidatorOptions>(f, "validation: ", kInt, &S::validator);
  f.flag("save_json", "the final validation writes predictions.json (COCO results) into the run folder")
      .to(&S::save_json);
  f.flag("plots", "write plots").to(&S::plots);
  f.flag("tensorboard", "",
         "write TensorBoard events into the run folder: per epoch the results.csv values, at the end the plots "
         "(default: the settings file's tensorboard, False; see lucid settings)")
      .resolve([](const S&) { return config::load_user_settings().tensorboard; })
      .role(Role::Execution)
      .to(&S::tensorboard);
  f.integer("patience", "epochs without fitness improvement before stopping (0: never stop early)")
      .range(0, kInt)
      .to(&S::patience);
  f.flag("save", "write checkpoints every epoch; False: only in the epoch the fit ends with (no resume before it)")
      .to(&S::save);
  f.integer("save_period", "also keep a checkpoint every N epochs").range(-1, kInt).to(&S::save_period);
  f.flag("save_pt",
         "also write weights/best.pt and last.pt, Ultralytics checkpoints of the EMA weights, at the end of "
         "training (lucid export format=pt: needs the ultralytics package, the pt extra)")
      .role(Role::Adjustable)
      .to(&S::save_pt);
  f.flag("verbose", "the final validation prints a row per class").role(Role::Execution).to(&S::verbose);
  f.flag("profile", "the reference's ONNX and TensorRT speed profiling for loggers: not available")
      .check([](const bool& v) { return !v; },
             "the reference profiles ONNX and TensorRT exports for its loggers, which lucid does not do; "
             "stage_times=True and kernel_times=N time lucid's own stages",
             {"True"})
      .to(&S::profile);
  f.flag("compile", "torch.compile of the model: not available (capture_* record CUDA graphs instead)")
      .check([](const bool& v) { return !v; },
             "torch.compile is a Python compiler that LibTorch does not have; capture_step=True records the whole "
             "step as CUDA graphs instead",
             {"True"})
      .to(&S::compile);
  f.text("project", "",
         "parent directory of run directories (default: runs_dir/segment, runs_dir of lucid settings: runs)")
      .resolve([](const S&) { return config::default_project(); })
      .role(Role::Location)
      .to(&S::project);
  f.text("name", "run folder name, one folder inside project (numbered if it exists)")
      .role(Role::Location)
      .to(&S::name);
  f.flag("exist_ok", "reuse an existing run folder (one training at a time writes into a folder)")
      .role(Role::Location)
      .to(&S::exist_ok);
  f.text("resume", "continue a run from its weights/last checkpoint (path, or True for the newest run)")
      .resolve([](const S&) { return std::string("False"); })
      .role(Role::Location)
      .to(&S::resume);
  f.cross_check([](const S& s) {
    if (!s.execution.gpu_augment) return;
    const auto& a = s.loader.aug;
    for (auto [k, v] : {std::pair{"mixup", a.mixup}, {"cutmix", a.cutmix}, {"copy_paste", a.copy_paste}})
      if (v != 0)
        throw UserError(std::string("option ") + k + "=" + config::format_number(v) +
                        ": gpu_augment=True renders mosaic, perspective and flips only; use gpu_augment=False with " +
                        k + "=" + config::format_number(v) + ", or " + k + "=0.0 with gpu_augment=True");
  });
}

// Declaration order is the order of --help, args.yaml and the reads (a default may read the values
// declared before it).
void declare(config::FieldList<S>& f) {
  declare_inputs(f);
  declare_devices_and_data(f);
  declare_optimization(f);
  declare_augmentation(f);
  declare_execution(f);
  declare_validation_and_outputs(f);
}

}  // namespace

const config::FieldList<TrainSettings>& train_fields() {
  static const auto* fields = [] {
    auto* f = new config::FieldList<TrainSettings>("train");
    declare(*f);
    return f;
  }();
  return *fields;
}

config::Options train_options() { return train_fields().options(); }

TrainSettings TrainSettings::from(const config::Options& options) { return train_fields().read(options); }

void TrainSettings::set_batch(int64_t count) { train_fields().find("batch")->read(*this, std::to_string(count)); }

bool execution_option(const std::string& key) {
  const auto* f = train_fields().find(key);
  return f && f->role == config::Role::Execution;
}

nlohmann::ordered_json train_record(const TrainSettings& s, RecordScope scope) {
  nlohmann::ordered_json record = nlohmann::ordered_json::object();
  for (const auto& f : train_fields().fields())
    if (scope == RecordScope::ArgsYaml || f.role == config::Role::Computation || f.role == config::Role::Adjustable)
      record[f.spec.key] = f.write(s);
  return record;
}

TrainSettings settings_from_record(const nlohmann::ordered_json& record, const std::string& file,
                                   const std::vector<std::string>& overrides) {
  auto options = train_options();
  std::vector<std::string> tokens;
  for (auto it = record.begin(); it != record.end(); ++it) {
    if (!options.values().count(it.key()) || it.key() == "resume") continue;
    if (!it.value().is_string())
      throw UserError(file + ": checkpoint state 'train_args." + it.key() + "' is not a string");
    tokens.push_back(it.key() + "=" + it.value().get<std::string>());
  }
  tokens.insert(tokens.end(), overrides.begin(), overrides.end());
  options.parse(tokens);
  return TrainSettings::from(options);
}

std::vector<std::string> resume_tokens(const config::Options& o) {
  std::vector<std::string> tokens;
  for (const auto& f : train_fields().fields())
    if (o.given(f.spec.key) && (f.role == config::Role::Adjustable || f.role == config::Role::Execution))
      tokens.push_back(f.spec.key + "=" + o.str(f.spec.key));
  return tokens;
}

void refuse_options_ignored_by_resume(const config::Options& o, const nlohmann::ordered_json& run_args,
                                      const fs::path& run_dir, const std::string& checkpoint) {
  const bool newest = o.str("resume") == "True";
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw UserError("option " + key + "=" + o.str(key) + ": " + why +
                    "; to train from that checkpoint's weights with " +
                    "other options, start a new run with model=" + checkpoint);
  };
  if ((o.given("project") && !newest) || o.given("name")) {
    std::error_code ec;
    const auto asked = fs::weakly_canonical(fs::path(o.str("project")) / o.str("name"), ec);
    if (ec || asked != fs::weakly_canonical(run_dir, ec))
      refuse(o.given("name") ? "name" : "project", "resume= continues the run in " + run_dir.string());
  }
  const auto run = settings_from_record(run_args, checkpoint);
  for (const auto& f : train_fields().fields()) {
    const auto& key = f.spec.key;
    if (!o.given(key) || f.role != config::Role::Computation) continue;
    if (key == "model" && newest) continue;  // resume=True model=CHECKPOINT: the checkpoint resumed
    // Compared as resolved, so imgsz=650 is the run's imgsz=672 and a relative data= its absolute path.
    auto asked = run;
    f.read(asked, o.str(key));
    const auto run_value = f.write(run);
    if (f.write(asked) != run_value)
      refuse(key, "resume= continues the run with its own " + key + "=" + run_value +
                      " (only epochs, time, device and the execution options can change on resume)");
  }
}

}  // namespace lucid::engine
