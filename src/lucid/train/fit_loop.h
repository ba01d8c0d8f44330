// The fit's loop and its hooks, in the shape of detectron2's TrainerBase.train: Trainer::fit runs
// epochs of steps and, around them, tells each hook of build_hooks (fit_hooks.h), in its order, what
// the loop is at:
//
//   before_train
//   per epoch:  before_epoch
//               per step: (the batch fetched) before_step, the step, after_step;
//                         loss_items once the step's items reach the host (a step later on CUDA)
//               after_train_epoch (the steps are done), then after_epoch (validation, the stop
//               decision and the epoch's files, weights/last last)
//   after_train
//
// FitLoop is the state the loop and its hooks share (detectron2's trainer and its storage): the
// run's parts, the fit's schedule and step, and what the current epoch has decided so far. Hooks
// talk to each other only through it, in the order build_hooks gives them.
#pragma once
#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lucid/feed/batch_source.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/optim/ema.h"
#include "lucid/optim/optimizer.h"
#include "lucid/optim/schedule.h"
#include "lucid/train/early_stopping.h"
#include "lucid/train/stop_rules.h"
#include "lucid/train/time_budget.h"
#include "lucid/train/train_options.h"
#include "lucid/train/training_step.h"
#include "lucid/train/validation_result.h"
#include "lucid/util/loader_wait.h"
#include "lucid/util/step_clock.h"
#include "lucid/weights/checkpoint.h"

namespace lucid::dist {
class DataParallel;
class GradientSync;
}  // namespace lucid::dist
namespace lucid::report {
class EventFile;
}

namespace lucid::engine {

// The trainer's parts a fit works on (references into the Trainer, which outlives the fit).
struct FitRun {
  TrainSettings& settings;
  nlohmann::ordered_json& args;  // args.yaml's record (time= rewrites its epochs)
  LoopState& state;
  const std::filesystem::path& run_dir;
  torch::Device device;
  bool primary;  // the process that validates and writes the run folder
  model::SegmentationModel model;
  loss::SegmentationLoss& loss;
  optim::Optimizer& optimizer;
  optim::ModelEMA& ema;
  BatchSource& train;
  const Validate& validate;
  dist::DataParallel* parallel;  // null unless a world was joined
  report::EventFile* events;     // tensorboard=True, the primary process; else null
  std::vector<float>& step_losses;
  std::vector<std::string>& results_rows;           // results.csv's rows so far (a resume's restored ones first)
  std::chrono::steady_clock::time_point fit_start;  // the complete-fit clock's start
  nlohmann::ordered_json& replay_summary;           // filled when the fit ends
};

struct FitLoop {
  FitLoop(FitRun run, const optim::ScheduleOptions& schedule);
  ~FitLoop();
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  std::filesystem::path last_checkpoint() const { return run.run_dir / "weights" / "last.safetensors"; }

  FitRun run;
  // The fit, from the first epoch this process trains to the last.
  const int64_t nb;  // batches per epoch
  optim::Schedule sched;
  const std::array<std::string, 5> names;  // the loss items' names
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  const TimeBudget budget;
  const int64_t start_epoch;
  StepSettings step_settings;
  std::unique_ptr<dist::GradientSync> gradient_sync;
  std::unique_ptr<TrainingStep> step;  // its recordings are released with it
  util::LoaderWaitClock loader_wait;
  util::StepClock step_clock;
  bool mosaic_closed = false;  // close_mosaic closes once, as the reference's (time= may move the last epochs later)

  // The epoch: what its steps and its end have decided so far.
  int64_t epoch = 0;
  int64_t batch_index = 0;            // the current step's batch in the epoch
  const TrainBatch* batch = nullptr;  // the current step's batch (before_step to after_step)
  int64_t items_done = 0;             // steps whose loss items reached the host
  std::array<double, 5> mean{};       // the running mean of those items
  bool time_up = false;               // time= ran out after an optimizer step: the rest was not trained
  bool final_epoch = false;           // the epoch is the fit's last by its epochs
  ValidationResult val;               // the epoch's validation (validated=false: none)
  EpochVerdict verdict;               // best and the stopper's verdict
  StopDecision stop;                  // whether the fit ends after this epoch, and why
  double seconds = 0;                 // the fit's time at the end of the epoch's validation
};

// One step's loss items on the host.
using StepItems = LossItemsReader::Step;

class FitHook {
 public:
  virtual ~FitHook() = default;
  virtual const char* name() const = 0;
  virtual void before_train(FitLoop&) {}
  virtual void before_epoch(FitLoop&) {}
  virtual void before_step(FitLoop&) {}
  virtual void after_step(FitLoop&) {}
  virtual void loss_items(FitLoop&, const StepItems&) {}
  virtual void after_train_epoch(FitLoop&) {}
  virtual void after_epoch(FitLoop&) {}
  virtual void after_train(FitLoop&) {}
};

}  // namespace lucid::engine
