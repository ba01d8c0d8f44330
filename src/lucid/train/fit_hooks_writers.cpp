// The epoch's files: results.csv (and its TensorBoard scalars) with step_losses.f32, the
// checkpoints best and epochN, and weights/last, which commits the epoch.
#include "lucid/report/run_events.h"
#include "lucid/train/fit_hooks.h"
#include "lucid/util/files.h"

namespace lucid::engine {

void save_run_checkpoint(FitLoop& f, const std::filesystem::path& path, CheckpointContent content) {
  auto& run = f.run;
  if (!run.primary) return;
  run.state.ema_updates = run.ema.updates();
  run.state.optimizer_steps = run.optimizer.steps_taken();
  save_checkpoint(path.string(), *run.model, &*run.ema.model(), &run.optimizer, run.state, content);
}

// save=False: weights only in the epoch the fit ends with (the reference's final epoch; also an early
// or timed stop, so that the final validation has weights: docs/training.md).
bool keeps_weights(const FitLoop& f) { return f.run.settings.save || f.stop.stop(); }

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string line;
  for (const auto& item : items) line += (line.empty() ? "" : ",") + item;
  return line;
}

// results.csv gains the epoch's row (the reference's columns; TensorBoard gets the same scalars), and
// step_losses.f32 holds every step's loss items so far.
class ResultsLogHook : public FitHook {
 public:
  const char* name() const override { return "results_log"; }
  void after_epoch(FitLoop& f) override {
    auto& run = f.run;
    if (!run.primary) return;
    const auto columns = column_names(f);
    std::vector<std::string> cells;
    auto add = [&](double v) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", v);
      cells.emplace_back(buf);
    };
    add(static_cast<double>(f.epoch + 1));
    add(f.seconds);
    for (double v : f.mean) add(v);
    for (double v : f.val.metrics) add(v);
    for (double v : f.val.losses) add(v);
    for (const auto& g : run.optimizer.groups()) add(g.current_lr);
    run.results_rows.push_back(joined(cells));
    util::write_atomically((run.run_dir / "results.csv").string(), [&](std::ostream& out) {
      out << joined(columns) << "\n";
      for (const auto& r : run.results_rows) out << r << "\n";
    });
    if (run.events) report::log_results_row(*run.events, f.epoch + 1, columns, cells);
    util::write_atomically((run.run_dir / "step_losses.f32").string(), [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(run.step_losses.data()),
                static_cast<std::streamsize>(run.step_losses.size() * sizeof(float)));
    });
  }

 private:
  static std::vector<std::string> column_names(const FitLoop& f) {
    std::vector<std::string> columns{"epoch", "time"};
    for (const auto& n : f.names) columns.push_back("train/" + n);
    for (const char* m : {"precision(B)", "recall(B)", "mAP50(B)", "mAP50-95(B)", "precision(M)", "recall(M)",
                          "mAP50(M)", "mAP50-95(M)"})
      columns.push_back(std::string("metrics/") + m);
    for (const auto& n : f.names) columns.push_back("val/" + n);
    for (size_t g = 0; g < f.run.optimizer.groups().size(); ++g) columns.push_back("lr/pg" + std::to_string(g));
    return columns;
  }
};

// weights/best (the EMA weights and the run state) in an epoch that is best, and epochN every
// save_period epochs.
class CheckpointerHook : public FitHook {
 public:
  const char* name() const override { return "checkpointer"; }
  void after_epoch(FitLoop& f) override {
    if (!keeps_weights(f)) return;
    const auto weights = f.run.run_dir / "weights";
    if (f.verdict.best) save_run_checkpoint(f, weights / "best.safetensors", CheckpointContent::EmaOnly);
    const int64_t period = f.run.settings.save_period;
    if (period > 0 && (f.epoch + 1) % period == 0)
      save_run_checkpoint(f, weights / ("epoch" + std::to_string(f.epoch + 1) + ".safetensors"));
  }
};

// weights/last, the epoch's last write: it commits the epoch.
class LastCheckpointHook : public FitHook {
 public:
  const char* name() const override { return "last_checkpoint"; }
  void after_epoch(FitLoop& f) override {
    if (keeps_weights(f)) save_run_checkpoint(f, f.last_checkpoint());
  }
};

}  // namespace

std::unique_ptr<FitHook> results_log_hook() { return std::make_unique<ResultsLogHook>(); }
std::unique_ptr<FitHook> checkpointer_hook() { return std::make_unique<CheckpointerHook>(); }
std::unique_ptr<FitHook> last_checkpoint_hook() { return std::make_unique<LastCheckpointHook>(); }

}  // namespace lucid::engine
