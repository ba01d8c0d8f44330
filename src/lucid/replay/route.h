// Where each training stage runs: replayed from a recording, or natively. Pure host logic, so every
// fallback condition is tested without a GPU. A stage replays only when its option is on and every
// condition below holds; otherwise it runs natively and the first reason is reported.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lucid::replay {

// The whole training step (capture_step) has two: Step, forward, loss and backward as one micro-step
// recording; StepUpdate, clipping, the optimizer stages and the EMA update as another.
enum class Stage { SharedFeatures, Heads, Optimizer, Step, StepUpdate };
const char* stage_name(Stage stage);

struct ReplayOptions {
  bool network = false;    // capture_network
  bool heads = false;      // capture_segment_heads
  bool optimizer = false;  // capture_optimizer
  bool step = false;       // capture_step
  bool enabled(Stage stage) const;
  bool stages() const { return network || heads || optimizer; }
  bool any() const { return stages() || step; }
};

// What the fit knows about itself when it routes a step.
struct FitFacts {
  bool cuda = true;                 // the fit runs on a CUDA device
  int devices = 1;                  // devices the fit trains on
  bool training = true;             // the model is in training mode
  bool accumulation_fixed = true;   // the batches per optimizer step no longer change (warmup is over)
  bool shared_frozen = false;       // a backbone or neck parameter does not require gradients
  bool heads_frozen = false;        // a head parameter does not require gradients
  bool head_hooks = false;          // hooks are registered on the heads
  bool head_topology_stock = true;  // the heads read the shared features in the stock dispatch
  bool anomaly_detection = false;   // autograd anomaly mode (its checks are host reads)
  bool recording_failed = false;    // an earlier recording of this stage failed
  bool recordings_full = false;     // Step: a new recording is needed and the cap is reached
};

struct Route {
  bool replay = false;
  std::string reason;  // why the stage runs natively; empty when it replays
};

Route route(Stage stage, const ReplayOptions& options, const FitFacts& facts);

// Per-step check of a recorded stage's fixed input signature: a batch of another shape (the partial
// last batch) runs natively and creates no new recording. (The whole step records one recording per
// signature instead, up to its cap: FitFacts::recordings_full.)
Route route_step(Stage stage, bool signature_matches);

// Counts native steps per (stage, reason) and replays per stage; each reason is printed once.
class RouteLog {
 public:
  explicit RouteLog(bool print = true) : print_(print) {}
  void record(Stage stage, const Route& r);
  int64_t replays(Stage stage) const;
  int64_t native(Stage stage) const;
  // "stage: reason" -> count
  const std::map<std::string, int64_t>& reasons() const { return reasons_; }

 private:
  bool print_;
  std::map<std::string, int64_t> reasons_;
  std::map<Stage, int64_t> replays_, native_;
};

}  // namespace lucid::replay
