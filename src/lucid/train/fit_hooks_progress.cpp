// The progress line and the finiteness checks; the first training batches drawn.
#include <cmath>
#include <optional>

#include "lucid/plot/annotate.h"
#include "lucid/plot/canvas.h"
#include "lucid/train/fit_hooks.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/progress.h"

namespace lucid::engine {

namespace {

// The progress line's header: epoch, memory, the loss items, instances and input size.
std::string progress_header(const std::array<std::string, 5>& names, bool cuda) {
  char cell[64];
  std::snprintf(cell, sizeof cell, "%11s%11s", "Epoch", cuda ? "GPU_mem" : "CPU");
  std::string header = cell;
  for (const auto& n : names) {
    std::snprintf(cell, sizeof cell, "%11s", n.c_str());
    header += cell;
  }
  std::snprintf(cell, sizeof cell, "%11s%11s", "Instances", "Size");
  return header + cell;
}

// The progress line's columns after a step.
std::string progress_columns(int64_t epoch, int64_t epochs, bool cuda, const std::array<double, 5>& mean,
                             int64_t instances, int64_t size) {
  char cell[64];
  char mem[32] = "-";
  if (cuda) std::snprintf(mem, sizeof mem, "%.3gG", util::cuda_memory().reserved_mib / 1024.0);
  std::snprintf(cell, sizeof cell, "%11s%11s", (std::to_string(epoch + 1) + "/" + std::to_string(epochs)).c_str(), mem);
  std::string cols = cell;
  for (double m : mean) {
    std::snprintf(cell, sizeof cell, "%11.4g", m);
    cols += cell;
  }
  std::snprintf(cell, sizeof cell, "%11lld%11lld", static_cast<long long>(instances), static_cast<long long>(size));
  return cols + cell;
}

// The epoch's progress bar over its steps' loss items, each item checked finite as it arrives
// (a non-finite loss stops the fit naming the step), and the weights checked after the epoch.
class ProgressHook : public FitHook {
 public:
  const char* name() const override { return "progress"; }
  void before_epoch(FitLoop& f) override { progress_.emplace(progress_header(f.names, f.run.device.is_cuda()), f.nb); }
  void loss_items(FitLoop& f, const StepItems& st) override {
    for (size_t k = 0; k < st.items.size(); ++k)
      if (!std::isfinite(st.items[k]))
        throw UserError("non-finite " + f.names[k] + " at epoch " + std::to_string(st.epoch + 1) + " batch " +
                        std::to_string(st.batch + 1) + "; the last good checkpoint is " + f.last_checkpoint().string());
    progress_->update(f.items_done, progress_columns(st.epoch, f.run.settings.epochs, f.run.device.is_cuda(), f.mean,
                                                     st.instances, st.size));
  }
  void after_train_epoch(FitLoop&) override { progress_->finish(); }
  void after_epoch(FitLoop& f) override {
    torch::NoGradGuard no_grad;
    for (const auto& p : f.run.model->parameters())
      if (!torch::isfinite(p).all().item<bool>())
        throw UserError("non-finite weights after epoch " + std::to_string(f.epoch + 1) +
                        "; the last good checkpoint is " + f.last_checkpoint().string());
  }

 private:
  std::optional<util::Progress> progress_;
};

// The first three batches of the fit's epoch 0 drawn with their labels into train_batch0..2.jpg,
// as the reference plots its first iterations.
class BatchPlotsHook : public FitHook {
 public:
  BatchPlotsHook(std::vector<std::string> names, bool overlap_mask)
      : names_(std::move(names)), overlap_mask_(overlap_mask) {}
  const char* name() const override { return "batch_plots"; }
  void before_step(FitLoop& f) override {
    if (f.epoch != 0 || f.batch_index >= 3) return;
    if (!plot::available()) {
      plot::skip_warning();
      return;
    }
    const auto& b = *f.batch;
    const auto& t = b.targets;
    const int64_t bs = b.images.size(0), h = b.images.size(2), w = b.images.size(3);
    auto labels = plot::target_instances(t.batch_idx, t.cls, t.bboxes, t.masks, bs, h, w, overlap_mask_);
    const auto file = "train_batch" + std::to_string(f.batch_index) + ".jpg";
    plot::plot_image_grid(b.images.cpu(), labels, {}, names_, (f.run.run_dir / file).string());
  }

 private:
  std::vector<std::string> names_;
  bool overlap_mask_;
};

}  // namespace

std::unique_ptr<FitHook> progress_hook() { return std::make_unique<ProgressHook>(); }
std::unique_ptr<FitHook> batch_plots_hook(std::vector<std::string> names, bool overlap_mask) {
  return std::make_unique<BatchPlotsHook>(std::move(names), overlap_mask);
}

}  // namespace lucid::engine
