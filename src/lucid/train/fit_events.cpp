#include "lucid/train/fit_events.h"

#include <atomic>

namespace lucid::engine {

namespace {
std::atomic<FitObserver*> observer{nullptr};
}

const char* event_name(FitEventKind kind) {
  switch (kind) {
    case FitEventKind::PretrainRoutineStart:
      return "on_pretrain_routine_start";
    case FitEventKind::PretrainRoutineEnd:
      return "on_pretrain_routine_end";
    case FitEventKind::TrainBatchStart:
      return "on_train_batch_start";
    case FitEventKind::ValStart:
      return "on_val_start";
    case FitEventKind::ValBatchStart:
      return "on_val_batch_start";
    case FitEventKind::ValBatchEnd:
      return "on_val_batch_end";
    case FitEventKind::ValEnd:
      return "on_val_end";
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

void observe_validation(ValidatorOptions& validator, const std::string& save_dir, bool training) {
  auto* o = fit_observer();
  if (!o) return;
  validator.on_event = [o, save_dir, training](ValEvent e, int64_t batch, const metrics::ValResults* results) {
    static constexpr FitEventKind kinds[] = {FitEventKind::ValStart, FitEventKind::ValBatchStart,
                                             FitEventKind::ValBatchEnd, FitEventKind::ValEnd};
    const auto kind = kinds[static_cast<int>(e)];
    if (!o->wants(kind)) return;
    FitEvent event;
    event.kind = kind;
    event.batch = batch;
    event.run_dir = save_dir;
    event.training = training;
    event.val_results = results;
    o->on_event(event);
  };
}

}  // namespace lucid::engine
