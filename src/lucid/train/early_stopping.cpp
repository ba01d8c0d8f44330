#include "lucid/train/early_stopping.h"

namespace lucid::engine {

namespace {

bool measured(double best_fitness) { return best_fitness >= 0; }

}  // namespace

EpochVerdict judge_epoch(LoopState& state, std::optional<double> fitness, int64_t patience) {
  EpochVerdict v;
  ++state.epochs_without_improvement;  // epochs since the stopper's best epoch
  if (!fitness) {
    v.best = !measured(state.best_fitness);
    if (v.best) state.best_epoch = state.epoch;
    return v;
  }
  // The stopper's rule (fitness > best or best == 0) and the trainer's (best is None or best < fitness)
  // keep the same best value for fitness >= 0; only the stopper restarts its count on a 0 tie.
  if (*fitness > state.best_fitness || state.best_fitness <= 0) {
    state.best_fitness = *fitness;
    state.epochs_without_improvement = 0;
  }
  v.best = *fitness == state.best_fitness;
  if (v.best) state.best_epoch = state.epoch;
  v.stop = patience > 0 && state.epochs_without_improvement >= patience;
  return v;
}

bool validation_due(bool val, bool final_epoch, bool time_up) { return val || final_epoch || time_up; }

bool early_stop_due(const LoopState& state, int64_t patience) {
  return patience > 0 && measured(state.best_fitness) && state.epochs_without_improvement >= patience;
}

}  // namespace lucid::engine
