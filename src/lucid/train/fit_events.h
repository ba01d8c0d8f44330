// What a fit or a validation tells an observer in the process (the Python package's callbacks): the
// reference's trainer and validator events with the loop's numbers, and a stop request polled
// between training steps. With no observer set (the `lucid` command) a fit behaves exactly as
// without this file.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lucid/evaluate/validator.h"

namespace lucid::engine {

// The reference's callback events, in the order a fit raises them.
enum class FitEventKind {
  PretrainRoutineStart,  // on_pretrain_routine_start: the run folder is known, before data and model
  PretrainRoutineEnd,    // on_pretrain_routine_end: data, model and optimizer are ready (before on_train_start)
  TrainStart,            // on_train_start: before the first (or resumed) epoch
  TrainBatchStart,       // on_train_batch_start: a batch is fetched, before its step
  TrainEpochStart,       // on_train_epoch_start
  TrainBatchEnd,         // on_train_batch_end: a step's loss items have reached the host
  TrainEpochEnd,         // on_train_epoch_end: the epoch's steps are done, before validation
  ModelSave,             // on_model_save: the epoch's checkpoints are written (weights/last committed it)
  FitEpochEnd,           // on_fit_epoch_end: after validation and the checkpoints
  TrainEnd,              // on_train_end: the fit's last epoch is committed
  // The validator's events (each epoch's validation, the final one, `lucid val` from the package).
  ValStart,       // on_val_start: before the validation header
  ValBatchStart,  // on_val_batch_start: a validation batch is fetched
  ValBatchEnd,    // on_val_batch_end: its detections are scored
  ValEnd,         // on_val_end: the results are printed (val_results)
};
constexpr int kFitEventKinds = static_cast<int>(FitEventKind::ValEnd) + 1;

const char* event_name(FitEventKind kind);

// The loop's state at an event; fields not yet known at that event keep their previous values.
struct FitEvent {
  FitEventKind kind = FitEventKind::TrainStart;
  int64_t epoch = 0;                    // 0-based epoch the event belongs to
  int64_t epochs = 0;                   // the fit's epoch count
  int64_t batch = 0;                    // TrainBatchEnd: 0-based batch in the epoch
  std::vector<std::string> loss_names;  // box_loss, seg_loss, cls_loss, dfl_loss, sem_loss
  std::array<double, 5> loss_items{};   // the last step's items (TrainBatchEnd and after)
  std::array<double, 5> tloss{};        // the epoch's running mean of the items
  std::array<double, 8> metrics{};      // validation P R mAP50 mAP50-95 of boxes, then masks
  std::array<double, 5> val_losses{};
  double fitness = 0;
  bool validated = false;  // metrics hold this epoch's validation
  std::vector<double> lr;  // per parameter group
  std::string run_dir;
  bool training = true;                              // validator events: the fit's per-epoch validation
  const metrics::ValResults* val_results = nullptr;  // ValEnd: the validation's results
};

class FitObserver {
 public:
  virtual ~FitObserver() = default;
  virtual void on_event(const FitEvent& event) = 0;
  // Whether on_event wants `kind` (the per-batch events are not built for an observer without
  // a callback for them).
  virtual bool wants(FitEventKind) { return true; }
  // Polled before each training step; true stops the fit there (FitInterrupted).
  virtual bool stop_requested() = 0;
};

// The process's observer (nullptr: none). Set it around a fit; not owned.
void set_fit_observer(FitObserver* observer);
FitObserver* fit_observer();

// A fit stopped on the observer's request before a step. The run's weights/last (the last committed
// epoch) is untouched, so `resume=` continues it exactly as after a kill.
// The validator's on_event for `validator` that hands its events to the process's observer (as
// ValStart ... ValEnd with run_dir `save_dir`; `training`: the fit's validation); unchanged without one.
void observe_validation(ValidatorOptions& validator, const std::string& save_dir, bool training);

class FitInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lucid::engine
