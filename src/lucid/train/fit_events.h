// What a fit tells an observer in the process (the Python package's callbacks): the reference's
// trainer events with the loop's numbers, and a stop request polled between training steps. With no
// observer set (the `lucid` command) a fit behaves exactly as without this file.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lucid::engine {

// The reference's callback events, in the order a fit raises them.
enum class FitEventKind {
  TrainStart,       // on_train_start: before the first (or resumed) epoch
  TrainEpochStart,  // on_train_epoch_start
  TrainBatchEnd,    // on_train_batch_end: a step's loss items have reached the host
  TrainEpochEnd,    // on_train_epoch_end: the epoch's steps are done, before validation
  ModelSave,        // on_model_save: the epoch's checkpoints are written (weights/last committed it)
  FitEpochEnd,      // on_fit_epoch_end: after validation and the checkpoints
  TrainEnd,         // on_train_end: the fit's last epoch is committed
};

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
};

class FitObserver {
 public:
  virtual ~FitObserver() = default;
  virtual void on_event(const FitEvent& event) = 0;
  // Polled before each training step; true stops the fit there (FitInterrupted).
  virtual bool stop_requested() = 0;
};

// The process's observer (nullptr: none). Set it around a fit; not owned.
void set_fit_observer(FitObserver* observer);
FitObserver* fit_observer();

// A fit stopped on the observer's request before a step. The run's weights/last (the last committed
// epoch) is untouched, so `resume=` continues it exactly as after a kill.
class FitInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lucid::engine
