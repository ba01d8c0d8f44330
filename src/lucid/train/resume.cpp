#include "lucid/train/resume.h"

#include "lucid/config/user_settings.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/trainer.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

namespace {

std::string newest_last_checkpoint(const std::string& project) {
  fs::path best;
  fs::file_time_type newest{};
  if (fs::exists(project))
    for (const auto& d : fs::directory_iterator(project)) {
      auto p = d.path() / "weights" / "last.safetensors";
      if (fs::exists(p) && (best.empty() || fs::last_write_time(p) > newest)) {
        best = p;
        newest = fs::last_write_time(p);
      }
    }
  if (best.empty()) throw UserError("resume=True: no weights/last.safetensors under " + project);
  return best.string();
}

}  // namespace

ResumedRun read_resume(const config::Options& options) {
  ResumedRun r;
  if (options.str("resume").empty() || options.str("resume") == "False") return r;
  const auto project = options.given("project") ? options.str("project") : config::default_project();
  // resume=True: the checkpoint model= names (the reference's `yolo train resume
  // model=RUN/weights/last.pt`), else the newest run's under project=.
  const bool of_model = options.str("resume") == "True" && options.given("model");
  if (of_model && fs::path(options.str("model")).extension() != ".safetensors")
    throw UserError("resume=True model=" + options.str("model") + ": resume continues a lucid training checkpoint " +
                    "(RUN/weights/last.safetensors); to train from these weights, leave resume out");
  r.checkpoint = of_model                          ? options.str("model")
                 : options.str("resume") == "True" ? newest_last_checkpoint(project)
                                                   : options.str("resume");
  const auto& resume = r.checkpoint;
  // The run's own options, so it continues exactly as it started (but a new epochs or device).
  auto& state = r.state = read_checkpoint_state(resume);
  require_resumable(resume);
  r.run_dir = resume_run_dir(resume, state);
  require_last_checkpoint(resume, r.run_dir, state);
  refuse_options_ignored_by_resume(options, state.args, r.run_dir, resume);
  // The architecture stored in the checkpoint (its weights are restored by the trainer).
  r.model = read_model_source("resume", resume, /*weights=*/false);
  const auto run = settings_from_record(state.args, resume);
  // How stages execute is not part of the checkpoint: the resuming command line chooses it.
  r.settings = settings_from_record(state.args, resume, resume_tokens(options));
  if (r.settings.epochs != run.epochs && r.settings.epochs <= state.epoch)
    throw UserError("option epochs=" + options.str("epochs") + ": " + resume + " has trained " +
                    std::to_string(state.epoch) + " epochs already; to continue it, epochs= must be more than " +
                    std::to_string(state.epoch));
  if (fit_finished(state, r.settings)) {
    // report.html is the run's last write: without it the fit's final validation is still due.
    if (fs::exists(r.run_dir / "report.html")) throw nothing_to_resume(resume, state, r.settings);
    r.finishing = true;
  }
  return r;
}

}  // namespace lucid::engine
