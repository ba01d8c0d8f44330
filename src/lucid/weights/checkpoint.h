// Training checkpoints: model, EMA, optimizer state, pending (accumulated) gradients and the loop
// state, in one safetensors file written to a temporary name and renamed. The bytes depend only on
// the training state (no dates, paths or timings), so an interrupted and resumed run writes the
// same bytes as one that never stopped.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"
#include "lucid/util/error.h"

namespace lucid::engine {

struct LoopState {
  int64_t epoch = 0;         // epochs finished
  double best_fitness = -1;  // -1: none measured yet (train/early_stopping.h)
  int64_t best_epoch = 0;    // the epoch weights/best was last written in (0: none)
  int64_t ema_updates = 0;
  int64_t optimizer_steps = 0;
  int64_t last_opt_step = -1;
  int64_t accumulate = 1;
  int64_t epochs_without_improvement = 0;  // epochs since the early stopper's best epoch
  nlohmann::ordered_json args;             // the run's options
  nlohmann::ordered_json names;            // class names
  // The optimizer chosen at the run's start ({name, lr, momentum, auto}); null in checkpoints
  // written before it was recorded.
  nlohmann::ordered_json optimizer;
};

// What a checkpoint keeps: everything to resume (weights/last), or only what validation,
// prediction, export and a new run from its weights need: the EMA weights and the run state
// (weights/best; the reference strips the optimizer from best.pt likewise).
enum class CheckpointContent { Resumable, EmaOnly };

// The metadata also holds the model dict (`yaml`, config::ModelSpec::yaml), so the checkpoint
// rebuilds its model without the file it was first read from.
void save_checkpoint(const std::string& path, model::SegmentationModelImpl& model, model::SegmentationModelImpl* ema,
                     optim::Optimizer* optimizer, const LoopState& state,
                     CheckpointContent content = CheckpointContent::Resumable);

// Reads the loop state only (to learn the run's options before building anything).
LoopState read_checkpoint_state(const std::string& path);

// Refuses, before anything is built, a checkpoint that holds only the EMA weights (a best
// checkpoint) where a resume needs the model, optimizer and loop state.
void require_resumable(const std::string& path);
UserError not_resumable(const std::string& path);

// Restores model, EMA and optimizer (each optional) and returns the loop state.
LoopState load_checkpoint(const std::string& path, model::SegmentationModelImpl& model,
                          model::SegmentationModelImpl* ema, optim::Optimizer* optimizer);

}  // namespace lucid::engine
