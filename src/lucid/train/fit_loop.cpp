#include "lucid/train/fit_loop.h"

#include "lucid/dist/data_parallel.h"
#include "lucid/dist/gradient_sync.h"

namespace lucid::engine {

FitLoop::FitLoop(FitRun r, const optim::ScheduleOptions& schedule)
    : run(r),
      nb(r.train.batches_per_epoch()),
      sched(schedule, nb),
      names(r.loss.item_names()),
      budget(r.settings.time),
      start_epoch(r.state.epoch),
      loader_wait(r.device.is_cuda()),
      step_clock(r.device.is_cuda()) {
  sched.restore(r.state.accumulate);
  r.loss.set_epoch(r.state.epoch);
  step_settings.device = r.device;
  step_settings.autocast = r.device.is_cuda() && r.settings.amp;
  const auto& aug = r.settings.loader.aug;
  step_settings.hsv = aug.hsv_h != 0 || aug.hsv_s != 0 || aug.hsv_v != 0;
  step_settings.replay = r.settings.execution.replay;
  step_settings.input_into_recording = r.settings.multi_scale <= 0;
  // Data parallel: gradients all-reduced as backward produces them, or (replay) at the update.
  if (r.parallel) {
    std::vector<torch::Tensor> trainable;
    for (const auto& p : r.model->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    gradient_sync = r.parallel->gradient_sync(trainable, /*overlap=*/!step_settings.replay.any());
    step_settings.reduce_gradients = [sync = gradient_sync.get()] { sync->reduce(); };
    step_settings.before_micro_step = [sync = gradient_sync.get()](bool final) { sync->set_final_micro_step(final); };
  }
  step = std::make_unique<TrainingStep>(r.model, r.loss, r.optimizer, &r.ema, step_settings);
}

FitLoop::~FitLoop() = default;

}  // namespace lucid::engine
