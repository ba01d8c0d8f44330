// A resume= request read once: the checkpoint it names (resume=True: the one model= names, else the
// newest run's under project=), checked to be its run's weights/last and not finished, and what the
// run continues with: the loop state, the run's own settings (but a new epochs, device or execution
// option) and its architecture. The trainer takes it as it is; nothing reads the checkpoint's
// header again until the trainer restores the tensors.
#pragma once
#include <filesystem>
#include <string>

#include "lucid/config/options.h"
#include "lucid/train/train_options.h"
#include "lucid/weights/checkpoint.h"
#include "lucid/weights/model_source.h"

namespace lucid::engine {

struct ResumedRun {
  std::string checkpoint;  // empty: a new run
  std::filesystem::path run_dir;
  bool finishing = false;  // a finished fit whose final validation and report were not written
  ModelSource model;
  TrainSettings settings;
  LoopState state;  // the checkpoint's loop state
};

// The request of `options` (train's resume=, model=, project=, epochs= ...); an empty checkpoint
// when resume= is not given. Errors name the checkpoint and the option at fault.
ResumedRun read_resume(const config::Options& options);

}  // namespace lucid::engine
