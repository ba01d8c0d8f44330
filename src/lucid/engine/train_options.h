// The options of `lucid train` (reference names and defaults) and their typed view.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lucid/config/options.h"

namespace lucid::engine {

config::Options train_options();

// Options that choose how a run executes, not what it computes (stage replay, stage times, where
// the augmented images are rendered):
// checkpoints leave them out, and a resumed run takes them from its own command line.
bool execution_option(const std::string& key);

// resume= continues a run with its own options (run_args, from its checkpoint) in its own folder
// (run_dir): an option given beside it with another value, or a project/name naming another
// folder, would be ignored, so it is an error naming the option. Execution options stay the
// resuming command's choice; project= finds the run for resume=True.
void refuse_options_ignored_by_resume(const config::Options& options, const nlohmann::ordered_json& run_args,
                                      const std::filesystem::path& run_dir, const std::string& checkpoint);

struct TrainSettings {
  std::string data, model, pretrained, device, optimizer, project, name, resume, cache;
  int64_t epochs, imgsz, batch, workers, seed, nbs, close_mosaic, patience, save_period;
  double lr0, lrf, momentum, weight_decay, warmup_epochs, warmup_momentum, warmup_bias_lr;
  double box, cls, dfl, hsv_h, hsv_s, hsv_v, degrees, translate, scale, shear, perspective, flipud, fliplr, mosaic;
  bool cos_lr, overlap_mask, val, amp, deterministic, exist_ok, plots;
  double mixup = 0.0, cutmix = 0.0, copy_paste = 0.0;  // mix augmentations (data/mix.h)
  std::string copy_paste_mode = "flip";                // flip or mixup
  bool gpu_augment;  // training pixels rendered on the device (data::render_batch)
  bool capture_network, capture_segment_heads, capture_optimizer;  // stage replay, all off by default
  bool capture_step;  // whole-step replay (replay/step_recorder.h), off by default
  bool stage_times;
  int64_t world = 1;          // processes started for device=cpu (dist/launcher.h)
  bool sync_bn = false;       // data parallel: global BatchNorm statistics
  int64_t dist_timeout = 1800;  // seconds, every collective
  std::string freeze;
  std::vector<int> frozen;  // the layers freeze names
  std::string cfg;  // the options file the command line was completed from (config/cfg_file.h)
  double time = 0;  // hours; > 0 overrides epochs (engine/time_budget.h)
  // batch=-1 or a fraction in (0, 1): the fraction of GPU memory AutoBatch fills (engine/autobatch.h);
  // 0 for a batch given as a count. The command resolves it into `batch` before the fit.
  double autobatch_fraction = 0;
  std::string fraction;  // data::DatasetFraction's text
  bool single_cls = false, rect = false;
  double multi_scale = 0, cls_pw = 0, dropout = 0;
  int64_t mask_ratio = 4;
  // Validation during and after the fit.
  std::string split;
  double conf = 0.001, iou = 0.7;
  int64_t max_det = 300;
  bool save_json = false;

  static TrainSettings from(const config::Options& o);  // validates ranges; errors name the key
};

}  // namespace lucid::engine
