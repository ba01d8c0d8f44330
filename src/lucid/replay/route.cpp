#include "lucid/replay/route.h"

#include <cstdio>

namespace lucid::replay {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::SharedFeatures:
      return "shared features";
    case Stage::Heads:
      return "head predictions";
    case Stage::Optimizer:
      return "optimizer stages";
    case Stage::Step:
      return "training step";
    case Stage::StepUpdate:
      return "optimizer step and EMA";
  }
  return "?";
}

bool ReplayOptions::enabled(Stage stage) const {
  switch (stage) {
    case Stage::SharedFeatures:
      return network;
    case Stage::Heads:
      return heads;
    case Stage::Optimizer:
      return optimizer;
    case Stage::Step:
    case Stage::StepUpdate:
      return step;
  }
  return false;
}

Route route(Stage stage, const ReplayOptions& options, const FitFacts& f) {
  auto native = [](const char* why) { return Route{false, why}; };
  if (!options.enabled(stage)) return native("replay not requested");
  if (!f.cuda) return native("the fit runs on the CPU (recordings are CUDA graphs)");
  if (f.devices > 1) return native("more than one GPU");
  if (f.recording_failed) return native("its recording failed");
  if (f.anomaly_detection) return native("autograd anomaly detection is on");
  if (stage == Stage::StepUpdate) return Route{true, ""};
  if (stage == Stage::Step) {
    // The micro-step recording does not depend on the accumulation count: warmup replays too.
    // Frozen layers do not matter: gradients are taken for the trainable parameters only.
    if (!f.training) return native("the model is not in training mode");
    if (f.head_hooks) return native("hooks on the heads");
    if (f.recordings_full) return native("recording cap reached (another input signature or capacity bucket)");
    return Route{true, ""};
  }
  if (!f.accumulation_fixed) return native("gradient accumulation still changes (warmup)");
  if (stage == Stage::Optimizer) return Route{true, ""};
  if (!f.training) return native("the model is not in training mode");
  if (stage == Stage::SharedFeatures && f.shared_frozen) return native("frozen shared features");
  if (stage == Stage::Heads) {
    if (f.heads_frozen) return native("frozen head parameters");
    if (f.head_hooks) return native("hooks on the heads");
    if (!f.head_topology_stock) return native("altered head topology or dispatch");
  }
  return Route{true, ""};
}

Route route_step(Stage stage, bool signature_matches) {
  if (!signature_matches)
    return Route{false, stage == Stage::Optimizer || stage == Stage::StepUpdate
                            ? "another set of gradients than the recorded one"
                            : "input signature differs from the recorded one (partial batch)"};
  return Route{true, ""};
}

void RouteLog::record(Stage stage, const Route& r) {
  if (r.replay) {
    ++replays_[stage];
    return;
  }
  ++native_[stage];
  auto key = std::string(stage_name(stage)) + ": " + r.reason;
  if (reasons_[key]++ == 0 && print_) std::printf("replay: %s run natively: %s\n", stage_name(stage), r.reason.c_str());
}

int64_t RouteLog::replays(Stage stage) const {
  auto it = replays_.find(stage);
  return it == replays_.end() ? 0 : it->second;
}

int64_t RouteLog::native(Stage stage) const {
  auto it = native_.find(stage);
  return it == native_.end() ? 0 : it->second;
}

}  // namespace lucid::replay
