// The fit report with its profilers (kernel_times, stage_times, the loader wait), and the observer's
// callbacks.
#include <optional>

#include "lucid/train/fit_events.h"
#include "lucid/train/fit_hooks.h"
#include "lucid/train/fit_report.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/kernel_times.h"
#include "lucid/util/trace.h"

namespace lucid::engine {

namespace {

// kernel_times=N: the device time of the N steps from the first of the second epoch of this
// process's fit (the first epoch, if it is the last), charged to the stages. The report keeps every
// kernel, so that a step's kernels can be set beside the floor's; the printed table the costliest.
class KernelProfile {
 public:
  KernelProfile(int64_t steps, int64_t epoch, bool primary) : steps_(primary ? steps : 0), epoch_(epoch) {}
  void before_step(int64_t epoch) {
    if (epoch == epoch_ && profiled_ == 0 && steps_ > 0) clock_.emplace();
  }
  void after_step() {
    if (clock_ && ++profiled_ == steps_) stop();
  }
  void end_epoch() {
    if (clock_) stop();  // the epoch ended first
  }
  const nlohmann::ordered_json& times() const { return times_; }

 private:
  void stop() {
    times_ = clock_->stop(profiled_, util::KernelClock::kAllKernels);
    clock_.reset();
    std::printf("%s", util::KernelClock::table(times_).c_str());
  }
  int64_t steps_, epoch_, profiled_ = 0;
  std::optional<util::KernelClock> clock_;
  nlohmann::ordered_json times_;
};

// fit_report.json when the fit ends (after best and epochN, before weights/last), with the complete
// fit's time and memory, the replay routing, the profiles and the loader wait, and their log lines.
class FitReportHook : public FitHook {
 public:
  const char* name() const override { return "fit_report"; }
  void before_train(FitLoop& f) override {
    const auto& run = f.run;
    const int64_t steps = run.settings.execution.kernel_times;
    if (steps > 0 && !run.device.is_cuda())
      throw UserError("option kernel_times=" + std::to_string(steps) + " profiles CUDA kernels; the fit runs on " +
                      run.device.str());
    kernels_.emplace(steps, f.start_epoch + 1 < run.settings.epochs ? f.start_epoch + 1 : f.start_epoch, run.primary);
    if (run.settings.execution.stage_times) stage_clock_.emplace(run.device.is_cuda());
  }
  void before_step(FitLoop& f) override { kernels_->before_step(f.epoch); }
  void after_step(FitLoop&) override { kernels_->after_step(); }
  void after_train_epoch(FitLoop&) override { kernels_->end_epoch(); }
  void after_epoch(FitLoop& f) override {
    if (f.stop.stop()) write(f);
  }

 private:
  void write(FitLoop& f);
  std::optional<KernelProfile> kernels_;
  std::optional<util::StageClock> stage_clock_;
};

void FitReportHook::write(FitLoop& f) {
  // The complete fit ends here, with the final epoch's commit (this report and weights/last) left;
  // releasing recordings and hashing for the report are outside it.
  const auto fit_end = std::chrono::steady_clock::now();
  auto& run = f.run;
  const auto device = run.device;
  const auto memory = util::cuda_memory(device.index() < 0 ? 0 : device.index());
  if (f.step_settings.replay.any()) {
    run.replay_summary = f.step->replay_summary();
    std::printf("replay: %s\n", run.replay_summary.dump().c_str());
  }
  f.step.reset();
  FitReportInput report;
  report.fit_seconds = std::chrono::duration<double>(fit_end - run.fit_start).count();
  report.peak_allocated_mib = device.is_cuda() ? memory.peak_allocated_mib : 0.0;
  report.peak_reserved_mib = device.is_cuda() ? memory.peak_reserved_mib : 0.0;
  report.epochs = run.state.epoch;
  report.model = run.model.get();
  report.ema = run.ema.model().get();
  report.ema_updates = run.ema.updates();
  report.optimizer = &run.optimizer;
  report.accumulate = f.sched.accumulate();
  report.last_opt_step = run.state.last_opt_step;
  report.step_losses = &run.step_losses;
  report.metrics = f.val.metrics;
  report.losses = f.val.losses;
  report.replay = run.replay_summary;
  report.kernel_times = kernels_->times();
  report.loader_wait = f.loader_wait.summary();
  std::printf("%s\n", util::LoaderWaitClock::line(report.loader_wait).c_str());
  report.step_time = f.step_clock.summary();
  std::printf("%s\n", util::StepClock::line(report.step_time).c_str());
  if (stage_clock_) {
    report.stage_times = stage_clock_->summary();
    stage_clock_.reset();
    std::printf("%s", util::StageClock::table(report.stage_times).c_str());
  }
  if (run.primary) write_fit_report((run.run_dir / kFitReportFile).string(), make_fit_report(report));
  std::printf("complete fit: %.3f s (from before data, model and trainer construction)\n", report.fit_seconds);
  const double secs = std::chrono::duration<double>(fit_end - f.start).count();
  std::printf("%lld epochs completed in %.3f hours (%.3f s); results in %s\n", static_cast<long long>(run.state.epoch),
              secs / 3600.0, secs, run.run_dir.string().c_str());
  if (device.is_cuda()) {
    auto m = util::cuda_memory(device.index() < 0 ? 0 : device.index());
    std::printf("peak GPU memory: %.0f MiB allocated, %.0f MiB reserved\n", m.peak_allocated_mib, m.peak_reserved_mib);
  }
}

// The observer's events (the Python package's callbacks, by the reference's names) and its stop
// request, polled before each step: the only place a fit stops on request, with weights/last the
// last committed epoch.
class CallbacksHook : public FitHook {
 public:
  explicit CallbacksHook(FitObserver& observer) : observer_(observer) {}
  const char* name() const override { return "callbacks"; }
  void before_train(FitLoop& f) override {
    event_.loss_names.assign(f.names.begin(), f.names.end());
    event_.run_dir = f.run.run_dir.string();
    notify(f, FitEventKind::PretrainRoutineEnd, f.run.state.epoch);
    notify(f, FitEventKind::TrainStart, f.run.state.epoch);
  }
  void before_epoch(FitLoop& f) override {
    event_.validated = false;
    notify(f, FitEventKind::TrainEpochStart, f.epoch);
  }
  void before_step(FitLoop& f) override {
    if (observer_.stop_requested())
      throw FitInterrupted("training stopped at epoch " + std::to_string(f.epoch + 1) + " batch " +
                           std::to_string(f.batch_index + 1) + "; the last committed epoch is in " +
                           f.last_checkpoint().string());
    if (observer_.wants(FitEventKind::TrainBatchStart)) {
      event_.batch = f.batch_index;
      notify(f, FitEventKind::TrainBatchStart, f.epoch);
    }
  }
  void loss_items(FitLoop& f, const StepItems& st) override {
    for (size_t k = 0; k < st.items.size(); ++k) event_.loss_items[k] = st.items[k];
    event_.tloss = f.mean;
    event_.batch = st.batch;
    if (observer_.wants(FitEventKind::TrainBatchEnd)) notify(f, FitEventKind::TrainBatchEnd, st.epoch);
  }
  void after_train_epoch(FitLoop& f) override {
    event_.tloss = f.mean;
    notify(f, FitEventKind::TrainEpochEnd, f.epoch);
  }
  void after_epoch(FitLoop& f) override {
    event_.metrics = f.val.metrics;
    event_.val_losses = f.val.losses;
    event_.fitness = f.val.fitness;
    event_.validated = f.val.validated;
    if (keeps_weights(f)) notify(f, FitEventKind::ModelSave, f.epoch);
    notify(f, FitEventKind::FitEpochEnd, f.epoch);
  }

 private:
  void notify(FitLoop& f, FitEventKind kind, int64_t epoch) {
    event_.kind = kind;
    event_.epoch = epoch;
    event_.epochs = f.run.settings.epochs;
    event_.lr.clear();
    for (const auto& g : f.run.optimizer.groups()) event_.lr.push_back(g.current_lr);
    observer_.on_event(event_);
  }
  FitObserver& observer_;
  FitEvent event_;
};

}  // namespace

std::unique_ptr<FitHook> fit_report_hook() { return std::make_unique<FitReportHook>(); }
std::unique_ptr<FitHook> callbacks_hook(FitObserver& observer) { return std::make_unique<CallbacksHook>(observer); }

}  // namespace lucid::engine
