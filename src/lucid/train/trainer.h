// The fit: builds the model, loss, optimizer, schedule and EMA for a run, trains epoch by epoch on
// a BatchSource, validates the EMA model after each epoch, and writes results.csv and checkpoints
// (weights/last and weights/best, atomically) into the run directory, and with tensorboard=True the
// same rows as TensorBoard scalars (report/run_events.h). resume continues from
// weights/last exactly as if the run had not stopped, wherever it stopped: each epoch writes
// results.csv, step_losses.f32, best, epochN and (when the fit ends there) fit_report.json first and
// weights/last last, so last commits the epoch, and a resume cuts the logs back to its epoch.
#pragma once
#include <array>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>

#include "lucid/feed/batch_source.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/optim/ema.h"
#include "lucid/train/fit_hooks.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/train_options.h"
#include "lucid/train/validation_result.h"
#include "lucid/util/error.h"
#include "lucid/weights/checkpoint.h"

namespace lucid::dist {
class DataParallel;
}
namespace lucid::report {
class EventFile;
}

namespace lucid::engine {

struct ResumedRun;

struct DatasetInfo {
  int64_t nc;
  std::vector<std::string> names;
  std::vector<int64_t> class_counts = {};  // training instances per class (for cls_pw)
  int64_t capacity_floor = 0;              // the loss's least instance capacity (loss::capacity_floor)
};

// The model a run trains: its architecture (nc = the dataset's) and, for a new run, the pretrained
// weights transferred into it (tensors whose names and shapes match; `Transferred N/M items` is
// printed). A resumed run takes its weights from the checkpoint instead.
struct ModelStart {
  config::ModelSpec spec;
  const std::map<std::string, torch::Tensor>* weights = nullptr;
};

class Trainer {
 public:
  // settings: the run's resolved settings (their record goes to args.yaml and into checkpoints).
  // resumed: a run read by read_resume (train/resume.h) that continues from its weights/last with
  // these settings (a new epochs or device, adjusted on resume, is recorded; see docs/cli.md); null
  // for a new run.
  Trainer(const TrainSettings& settings, DatasetInfo dataset, ModelStart model, std::unique_ptr<BatchSource> train,
          Validate validate, const ResumedRun* resumed = nullptr);

  // Trains to the last epoch; returns the final validation result. A run whose checkpoint is
  // finished (fit_finished) is refused.
  ValidationResult fit();
  ~Trainer();

  const std::filesystem::path& run_dir() const { return run_dir_; }
  model::SegmentationModel& model() { return model_; }
  // Loss items (5 floats) of every training step so far in this process, as raw bytes.
  const std::vector<float>& step_losses() const { return step_losses_; }
  // Stage replay of the last fit: per stage, whether it was recorded, replayed and native steps,
  // and the reasons of native steps (empty when replay was not requested); fit_report.json carries it.
  const nlohmann::ordered_json& replay_summary() const { return replay_summary_; }
  // The run's TensorBoard event file (tensorboard=True, the primary process), else null.
  report::EventFile* events() { return events_.get(); }

  // The complete-fit clock starts here (default: when this trainer began construction); the
  // command sets it to before it builds the data, so the time covers data, model and trainer
  // construction. It stops before the final epoch's commit (fit_report.json, then weights/last).
  void set_fit_start(std::chrono::steady_clock::time_point t) { fit_start_ = t; }

 private:
  // The construction in its order: determinism and the seed, the model (weights, device, layout,
  // data parallel, sync BatchNorm, frozen layers), the loss, the optimizer with its schedule and EMA
  // (returns the choice, recorded in checkpoints), then the resumed run's state or a new run folder,
  // and the TensorBoard file.
  void use_determinism();
  void build_model(const ModelStart& start, bool resuming);
  void build_loss();
  optim::OptimizerChoice build_optimizer(const ResumedRun* resumed);
  void resume(const ResumedRun& resumed, const optim::OptimizerChoice& choice);
  void open_run_folder();
  void open_event_file();

  // The loop's own parts (fit_loop.h): an epoch's start, its steps, and one step.
  FitRun fit_run();
  void begin_epoch(FitLoop& f);
  void train_epoch(FitLoop& f, const FitHooks& hooks);
  std::optional<TrainBatch> fetch(FitLoop& f);
  // One micro-step (and the optimizer step at the accumulation boundary): its loss items and input size.
  std::pair<torch::Tensor, int64_t> train_step(FitLoop& f, const TrainBatch& batch);
  void restore_logs(const std::string& checkpoint);

  std::chrono::steady_clock::time_point fit_start_ = std::chrono::steady_clock::now();  // first member: set first
  TrainSettings s_;
  optim::ScheduleOptions schedule_;  // s_.schedule, with optimizer=auto's warmup_bias_lr
  nlohmann::ordered_json args_;
  DatasetInfo dataset_;
  std::unique_ptr<BatchSource> train_;
  Validate validate_;
  torch::Device device_{torch::kCPU};
  model::SegmentationModel model_{nullptr};
  std::unique_ptr<loss::SegmentationLoss> loss_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::ModelEMA> ema_;
  LoopState state_;
  std::filesystem::path run_dir_;
  std::unique_ptr<RunFolderLock> lock_;  // held while this trainer writes into run_dir_
  // Data-parallel training (a world was joined): this rank's part; only the primary writes files.
  std::unique_ptr<dist::DataParallel> parallel_;
  bool primary_ = true;
  std::vector<std::string> results_rows_;
  std::unique_ptr<report::EventFile> events_;  // each results.csv row is also logged here
  std::vector<float> step_losses_;
  nlohmann::ordered_json replay_summary_ = nlohmann::ordered_json::object();
};

// Whether a checkpoint's fit is over (all epochs trained, or stopped early): nothing to resume.
bool fit_finished(const LoopState& state, const TrainSettings& settings);

// The refusal to resume a finished fit, as the reference words it (or that it stopped early),
// with how to extend it (epochs=).
UserError nothing_to_resume(const std::string& checkpoint, const LoopState& state, const TrainSettings& settings);

}  // namespace lucid::engine
