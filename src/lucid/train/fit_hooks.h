// The fit's hooks (fit_loop.h), one per concern, and the one place their order is decided.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "lucid/train/fit_loop.h"

namespace lucid::engine {

class FitObserver;

using FitHooks = std::vector<std::unique_ptr<FitHook>>;

// Which of the optional hooks a fit has.
struct HookPlan {
  bool data_parallel = false;       // a world was joined
  bool batch_plots = false;         // plots=True on the primary: train_batch0..2.jpg of the fit's epoch 0
  std::vector<std::string> names;   // class names, for the batch plots
  bool overlap_mask = true;         // how the batches' mask targets are laid out, for the batch plots
  FitObserver* observer = nullptr;  // the process's observer (the Python package's callbacks), primary only
};

HookPlan hook_plan(const FitLoop& f, std::vector<std::string> names);

// The hooks in their order; each event goes to them in this order.
FitHooks build_hooks(const HookPlan& plan);

// The hooks of each concern (fit_hooks_*.cpp).
std::unique_ptr<FitHook> progress_hook();
std::unique_ptr<FitHook> batch_plots_hook(std::vector<std::string> names, bool overlap_mask);
std::unique_ptr<FitHook> data_parallel_hook();
std::unique_ptr<FitHook> validation_hook();
std::unique_ptr<FitHook> stop_rules_hook();
std::unique_ptr<FitHook> results_log_hook();
std::unique_ptr<FitHook> checkpointer_hook();
std::unique_ptr<FitHook> fit_report_hook();
std::unique_ptr<FitHook> last_checkpoint_hook();
std::unique_ptr<FitHook> callbacks_hook(FitObserver& observer);

// The run's checkpoint at `path` (the primary process only): model, EMA, optimizer and loop state,
// or the EMA weights and the state alone.
void save_run_checkpoint(FitLoop& f, const std::filesystem::path& path,
                         CheckpointContent content = CheckpointContent::Resumable);

// Whether the epoch keeps weights: every epoch with save=True, else only the one the fit ends with.
bool keeps_weights(const FitLoop& f);

}  // namespace lucid::engine
