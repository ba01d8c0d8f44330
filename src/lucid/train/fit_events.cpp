#include "lucid/train/fit_events.h"

#include <atomic>

namespace lucid::engine {

namespace {
std::atomic<FitObserver*> observer{nullptr};
}

const char* event_name(FitEventKind kind) {
  switch (kind) {
    case FitEventKind::TrainStart:
      return "on_train_start";
    case FitEventKind::TrainEpochStart:
      return "on_train_epoch_start";
    case FitEventKind::TrainBatchEnd:
      return "on_train_batch_end";
    case FitEventKind::TrainEpochEnd:
      return "on_train_epoch_end";
    case FitEventKind::ModelSave:
      return "on_model_save";
    case FitEventKind::FitEpochEnd:
      return "on_fit_epoch_end";
    case FitEventKind::TrainEnd:
      return "on_train_end";
  }
  return "";
}

void set_fit_observer(FitObserver* o) { observer.store(o); }
FitObserver* fit_observer() { return observer.load(); }

}  // namespace lucid::engine
