// The options of `lucid train` (reference names and defaults), declared once in train_fields():
// each goes into the components' own option structs that TrainSettings is made of. The command-line
// table, --help, args.yaml and the checkpoint's run record (train_args) are generated from that list.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/data/dataset.h"
#include "lucid/data/loader.h"
#include "lucid/evaluate/validator.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/optim/schedule.h"
#include "lucid/replay/route.h"
#include "lucid/weights/run_record.h"

namespace lucid::engine {

// The optimizer as named on the command line (optim::choose_optimizer turns it into one).
struct OptimizerSettings {
  std::string name = "auto";  // auto, SGD, MuSGD, AdamW, Adam, Adamax, NAdam, RAdam or RMSprop
  double lr0 = 0.01, momentum = 0.937, weight_decay = 0.0005;
  int64_t nbs = 64;  // nominal batch size: gradient accumulation and weight-decay scaling
};

// How the fit's stages execute; not what it computes (checkpoints leave it out).
struct ExecutionSettings {
  replay::ReplayOptions replay;  // capture_network, capture_segment_heads, capture_optimizer, capture_step
  bool stage_times = false;
  int64_t kernel_times = 0;  // training steps whose device kernels are profiled (util/kernel_times.h)
  bool gpu_augment = false;  // training pixels rendered on the device (data::render_batch)
};

// batch=: a count of images, or -1 / a fraction in (0, 1): AutoBatch fills that fraction of the GPU
// memory (train/autobatch.h; -1 is the reference's 0.6). The command resolves a fraction into a
// count before the fit, so the record holds the batch the run used.
struct BatchOption {
  int64_t count = 0;              // 0 while AutoBatch is still to choose
  double autobatch_fraction = 0;  // 0 for a count
};

// A run's settings, resolved. Each member's initializer is its option's default (the table in
// train_options.cpp reads them; config/fields.h kComponentDefault), where the component's own
// default is not the training's (workers) or the member is the command's own.
// A run's settings, resolved: `epochs`, `imgsz`, `batch`, `device` and `data` hold the values the
// run uses (data as an absolute path; the synthetic dataset's YAML when data= is not given).
struct TrainSettings {
  std::string data, device;
  std::string model = kDefaultTrainModel;
  std::string pretrained = "True";
  std::string cache = "ram";
  std::string freeze = "None";
  std::string copy_paste_mode = "flip";  // as given (flip or mixup); loader.aug holds it as data::CopyPasteMode
  bool synthetic = false;                // data is the embedded synthetic dataset
  std::vector<int> frozen;               // the layers freeze names
  int64_t epochs = 0, seed = 0, patience = 100, save_period = -1, close_mosaic = 10;
  bool deterministic = true, amp = true, val = true, plots = true;
  bool tensorboard = false;               // TensorBoard events in the run folder (report/run_events.h)
  bool save = true;                       // checkpoints every epoch (False: only the epoch the fit ends with)
  bool save_pt = false;                   // also weights/best.pt and last.pt, the reference's checkpoints
  bool verbose = true;                    // the final validation's per-class rows
  bool profile = false, compile = false;  // the reference's keys; only False is available (train_options.cpp)
  std::string project, name = "train", resume = "False";
  bool exist_ok = false;
  int64_t world = 1;             // processes started for device=cpu (dist/launcher.h)
  bool sync_bn = false;          // data parallel: global BatchNorm statistics
  int64_t dist_timeout = 1800;   // seconds, every collective
  std::string cfg;               // the options file the command line was completed from (config/cfg_file.h)
  double time = 0;               // hours; > 0 overrides epochs (train/time_budget.h)
  BatchOption batch_option;      // as given; loader.batch and schedule.batch hold its count
  std::string fraction = "1.0";  // as given; index.fraction holds it as data::DatasetFraction
  double multi_scale = 0, cls_pw = 0, dropout = 0;
  std::string split = "val";  // the split validated during and after the fit: val or test
  bool save_json = false;     // the final validation writes predictions.json

  data::IndexOptions index;          // allow_outside_images, fraction, single_cls
  data::LoaderOptions loader = [] {  // training loads with 8 workers (the loader alone: 4)
    data::LoaderOptions o;
    o.workers = 8;
    return o;
  }();                          // imgsz, batch, workers, seed, overlap_mask, rect, mask_ratio, aug (mosaic, hsv_*, ...)
  loss::LossOptions loss;       // box, cls, dfl, overlap_mask, epochs
  OptimizerSettings optimizer;  // optimizer, lr0, momentum, weight_decay, nbs
  optim::ScheduleOptions schedule;  // epochs, lrf, cos_lr, warmup_*, momentum, nbs, batch
  ValidatorOptions validator;       // overlap_mask, amp, conf, iou, max_det, single_cls
  ExecutionSettings execution;

  int64_t imgsz() const { return loader.imgsz; }
  int64_t batch() const { return loader.batch; }
  // Sets the batch AutoBatch chose (every binding of batch=, so the record holds it).
  void set_batch(int64_t count);

  static TrainSettings from(const config::Options& options);  // reads every field; errors name the option
};

// Every option of `lucid train`, in the order of --help and of args.yaml.
const config::FieldList<TrainSettings>& train_fields();
config::Options train_options();

// The run record: each option's resolved value as text, in declared order. args.yaml holds all of
// them; a checkpoint (train_args) leaves out the execution and location options, so runs that
// differ only in how or where they run write the same bytes.
enum class RecordScope { ArgsYaml, Checkpoint };
nlohmann::ordered_json train_record(const TrainSettings& settings, RecordScope scope);

// Settings from a run record (a checkpoint's train_args, strings), with `overrides` (key=value)
// applied on top; keys no longer declared are skipped, values that are not text are errors naming `file`.
TrainSettings settings_from_record(const nlohmann::ordered_json& record, const std::string& file,
                                   const std::vector<std::string>& overrides = {});

// The options a checkpoint leaves out (capture_*, stage_times, gpu_augment): a resumed run takes
// them from its own command line.
bool execution_option(const std::string& key);

// resume= continues a run with its own options (run_args, from its checkpoint) in its own folder
// (run_dir). Beside it, an adjustable option (epochs, time, device) sets a new value; any other option
// given with another value than the run's (compared as resolved: imgsz=650 is imgsz=672, a relative
// data= the absolute path), or a project/name naming another folder, is an error naming the option.
// Execution options stay the resuming command's choice; project= finds the run for resume=True.
void refuse_options_ignored_by_resume(const config::Options& options, const nlohmann::ordered_json& run_args,
                                      const std::filesystem::path& run_dir, const std::string& checkpoint);

// What a resuming command line sets on top of the run's record: its adjustable and execution options.
std::vector<std::string> resume_tokens(const config::Options& options);

}  // namespace lucid::engine
