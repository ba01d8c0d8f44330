#include "lucid/train/fit_hooks.h"

#include "lucid/dist/data_parallel.h"
#include "lucid/train/fit_events.h"
#include "lucid/train/run_folder.h"
#include "lucid/util/trace.h"

namespace lucid::engine {

HookPlan hook_plan(const FitLoop& f, std::vector<std::string> names) {
  HookPlan plan;
  plan.data_parallel = f.run.parallel != nullptr;
  plan.batch_plots = f.run.settings.plots && f.run.primary;
  plan.names = std::move(names);
  plan.overlap_mask = f.run.settings.loader.overlap_mask;
  plan.observer = f.run.primary ? fit_observer() : nullptr;
  return plan;
}

FitHooks build_hooks(const HookPlan& plan) {
  FitHooks hooks;
  // The progress bar and the finiteness checks first: a non-finite loss or weight stops the fit
  // before anything of its epoch is validated or written.
  hooks.push_back(progress_hook());
  // The batch plots draw the fetched batch before its step (and before the kernel clock starts).
  if (plan.batch_plots) hooks.push_back(batch_plots_hook(plan.names, plan.overlap_mask));
  // Every rank's model buffers as the primary's before the primary validates them.
  if (plan.data_parallel) hooks.push_back(data_parallel_hook());
  hooks.push_back(validation_hook());
  // The stop decision needs the validation's fitness; the files below need the decision.
  hooks.push_back(stop_rules_hook());
  // The epoch's files in commit order: results.csv and step_losses.f32, best and epochN,
  // fit_report.json (the fit's last epoch), then weights/last, which commits the epoch: a run stopped
  // before it resumes from the previous epoch and rewrites the others with the same bytes.
  hooks.push_back(results_log_hook());
  hooks.push_back(checkpointer_hook());
  hooks.push_back(fit_report_hook());
  hooks.push_back(last_checkpoint_hook());
  // The observer last: on_model_save and on_fit_epoch_end come after the epoch is committed.
  if (plan.observer) hooks.push_back(callbacks_hook(*plan.observer));
  return hooks;
}

namespace {

// Data parallel: the primary's BatchNorm statistics given to every rank (without sync_bn each rank
// normalised over its part), and the gradients of the primary kept, before validation.
class DataParallelHook : public FitHook {
 public:
  const char* name() const override { return "data_parallel"; }
  void after_epoch(FitLoop& f) override {
    auto& parallel = *f.run.parallel;
    parallel.share_buffers(*f.run.model);
    parallel.share_buffers(*f.run.ema.model());
    parallel.gather_gradients(f.run.model->parameters());
  }
};

// Rank 0 validates; every rank takes its result, so best and early stopping agree.
ValidationResult shared_validation(const dist::DataParallel& parallel, const ValidationResult& v) {
  std::vector<double> flat(v.metrics.begin(), v.metrics.end());
  flat.insert(flat.end(), v.losses.begin(), v.losses.end());
  flat.push_back(v.fitness);
  flat.push_back(v.validated ? 1.0 : 0.0);
  flat = parallel.from_primary(std::move(flat));
  ValidationResult out;
  std::copy_n(flat.begin(), out.metrics.size(), out.metrics.begin());
  std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(out.metrics.size()), out.losses.size(), out.losses.begin());
  out.fitness = flat[flat.size() - 2];
  out.validated = flat.back() != 0;
  return out;
}

// The EMA model validated on the primary when the epoch is due (validation_due), between the
// steps' recordings (their memory pool).
class ValidationHook : public FitHook {
 public:
  const char* name() const override { return "validation"; }
  void after_epoch(FitLoop& f) override {
    ValidationResult val;
    const auto& run = f.run;
    if (run.validate && validation_due(run.settings.val, f.final_epoch, f.time_up) && run.primary) {
      util::TraceRange range("validation");
      const auto alone = run.parallel ? run.parallel->alone() : nullptr;
      f.step->beside_steps([&] { val = run.validate(run.ema.model(), run.loss); });
      val.validated = true;
    }
    f.val = run.parallel ? shared_validation(*run.parallel, val) : val;
  }
};

// The epoch counted in the loop state, best and the stopper judged (judge_epoch), then whether the
// fit ends here (decide_stop). With time= the epochs re-estimated: the checkpoint's record,
// args.yaml, the schedule and the loss's epoch count follow.
class StopRulesHook : public FitHook {
 public:
  const char* name() const override { return "stop_rules"; }
  void after_epoch(FitLoop& f) override {
    auto& run = f.run;
    run.state.epoch = f.epoch + 1;
    const auto fitness = f.val.validated ? std::optional<double>(f.val.fitness) : std::nullopt;
    f.verdict = judge_epoch(run.state, fitness, run.settings.patience);
    run.state.accumulate = f.sched.accumulate();
    f.seconds = f.elapsed();
    f.stop = decide_stop({f.epoch, run.settings.epochs, f.verdict.stop, f.time_up, f.start_epoch, f.seconds}, f.budget);
    if (!f.budget.active()) return;
    run.settings.epochs = f.stop.epochs;
    run.args["epochs"] = run.state.args["epochs"] = std::to_string(run.settings.epochs);
    // args.yaml follows the checkpoint's epochs (rewritten only when the count changed).
    if (run.primary) update_args_yaml(run.run_dir, run.args);
    f.sched.set_epochs(run.settings.epochs, f.nb);
    run.loss.set_epochs(run.settings.epochs);
  }
};

}  // namespace

std::unique_ptr<FitHook> data_parallel_hook() { return std::make_unique<DataParallelHook>(); }
std::unique_ptr<FitHook> validation_hook() { return std::make_unique<ValidationHook>(); }
std::unique_ptr<FitHook> stop_rules_hook() { return std::make_unique<StopRulesHook>(); }

}  // namespace lucid::engine
