// Stage replay for one fit. After the fit's warm-up the recorder records, once, the stages whose
// options are on and whose routes hold (route.h): the shared features (backbone + neck) as one
// graphed callable, each head prediction as its own graphed callable, and the optimizer's update
// preparation and orthogonalisation. Every later step with the recorded input signature replays
// them; any other step runs natively through the very same model and optimizer code. Recordings
// live only as long as the recorder (the fit): they are released when the fit ends or fails and
// never reach checkpoints.
#pragma once
#include <nlohmann/json.hpp>

#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"
#include "lucid/replay/graphed_callable.h"
#include "lucid/replay/route.h"

namespace lucid::replay {

class StageRecorder {
 public:
  StageRecorder(model::SegmentationModelImpl& model, optim::Optimizer& optimizer, ReplayOptions options,
                Backend backend, bool print = true);
  ~StageRecorder();
  StageRecorder(const StageRecorder&) = delete;
  StageRecorder& operator=(const StageRecorder&) = delete;

  // The facts the routes depend on that change during a fit (set before each step).
  void set_accumulation_fixed(bool fixed) { facts_.accumulation_fixed = fixed; }
  const FitFacts& facts() const { return facts_; }

  // The model's training forward (call it where model.forward(x) would be called, under the same
  // autocast): replayed stages where they hold, native ones elsewhere.
  model::HeadOutputs forward(const Tensor& x);
  // The optimizer step (prepare, orthogonalize, apply), its first two stages replayed where they hold.
  void optimizer_step();

  const RouteLog& log() const { return log_; }
  bool network_recorded() const { return network_ != nullptr; }
  bool heads_recorded() const { return !heads_.empty(); }
  bool optimizer_recorded() const { return prepare_.recorded(); }
  // Replay and native counts, reasons and recording times per stage.
  nlohmann::ordered_json summary() const;

 private:
  FitFacts facts_for(const model::SegmentationModelImpl& model) const;
  bool record_features(const Tensor& x, bool network, bool heads);
  bool record_optimizer();
  void release_features();
  void warm_up(const Tensor& x);
  void swap_grads();  // exchanges param.grad with the optimizer recording's static gradients

  model::SegmentationModelImpl& model_;
  optim::Optimizer& optimizer_;
  ReplayOptions options_;
  Backend backend_;
  FitFacts facts_;
  RouteLog log_;
  bool features_failed_ = false, optimizer_failed_ = false;
  double features_record_s_ = 0, optimizer_record_s_ = 0;
  double features_kept_mib_ = 0, optimizer_kept_mib_ = 0;

  std::unique_ptr<RecordingContext> ctx_;  // every recording's stream, pool and replay order
  std::unique_ptr<GraphedCallable> network_;
  std::vector<std::unique_ptr<GraphedCallable>> heads_;
  std::vector<Tensor> head_inputs_;             // staged native features, when only the heads are recorded
  std::vector<Tensor> opt_params_, opt_grads_;  // the optimizer recording's gradient buffers
  Graph prepare_, orthogonalize_;
};

}  // namespace lucid::replay
