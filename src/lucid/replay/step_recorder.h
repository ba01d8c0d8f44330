// Whole-step recording (capture_step=True): the training step as two kinds of recordings replayed
// every step.
//   micro-step  forward (under the fit's autocast), loss and backward (the loss's own included),
//               one recording per key: the input signature (images, and the padded targets'
//               shapes and dtypes: the loss's capacity bucket); the end2end loss weights are device
//               tensors of the loss, so they need no key. Its gradients land in one set of
//               buffers that every recording shares (as its input buffer is shared by every
//               recording of the same image signature); they are then assigned to (first
//               micro-step after an optimizer step) or added to (accumulation) the parameters'
//               gradients exactly as AccumulateGrad does natively, so the recording does not
//               depend on the accumulation count and warmup steps replay too. The forward's
//               outputs stay in the pool only where asked for (keep_outputs): kept, every
//               recording would hold its own.
//   update      gradient clipping, every optimizer stage including apply, and the EMA blend, one
//               recording per fit, replayed at the accumulation boundary. The per-step scalars
//               (learning rates, momentum, AdamW's bias corrections, the EMA decay) live in device
//               tensors uploaded natively before the replay; the host's step and update counts
//               are counted natively after it.
// Recording never advances state: warm-up passes run before capture and every tensor they move
// (BatchNorm statistics; for the update, parameters, optimizer state, EMA and gradients) is
// restored. The number of micro-step recordings is capped; a step the recordings cannot hold runs
// natively with a counted reason (route.h), through the very same step code.
// With record_on_second_use a key's first micro-step runs eagerly, the recording's own code in the
// recordings' pool on the capture stream, and the key is recorded at its second use: a key used once
// (the partial last batch of a one-epoch fit, a rare capacity bucket) costs one native step instead of
// a recording, and a key used again is captured without a warm-up pass, the eager step having made
// every first-use set-up and left its memory in the pool for the capture.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>

#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"
#include "lucid/optim/ema.h"
#include "lucid/optim/optimizer.h"
#include "lucid/replay/graph.h"
#include "lucid/replay/route.h"

namespace lucid::replay {

using torch::Tensor;

// The native step's code, which the recordings run: the same functions the native step calls.
struct StepProgram {
  // Forward under the fit's autocast, then the loss.
  std::function<std::pair<model::HeadOutputs, loss::LossResult>(const Tensor& x, const loss::PaddedTargets& targets)>
      forward_loss;
  // The device work of an optimizer step after its host uploads: clipping, prepare, orthogonalize,
  // apply, EMA blend.
  std::function<void()> update;
};

struct MicroStep {
  model::HeadOutputs
      outputs;   // aliases of the recording's static outputs, valid until the next replay; empty unless kept
  Tensor items;  // (5) loss items, likewise
};

class StepRecorder {
 public:
  StepRecorder(StepProgram program, model::SegmentationModel model, optim::Optimizer& optimizer, optim::ModelEMA* ema,
               Backend backend, int64_t max_recordings, bool keep_outputs, bool print = true,
               bool record_on_second_use = false);
  ~StepRecorder();
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // The micro-step of (x, targets) replayed, recording it first when its key is new: the gradients
  // are accumulated into the parameters' as natively. targets: padded to their bucket, on the host
  // (copied into the recording's buffers without blocking). nullopt: the step must run natively
  // (its reason is counted).
  std::optional<MicroStep> micro_step(const Tensor& x, const loss::PaddedTargets& targets);
  // The optimizer step replayed (uploads, replay, counts, zero_grad); false: it must run natively.
  bool optimizer_step();

  // Runs fn (validation between epochs) with its device memory drawn from the recordings' pool,
  // whose free blocks the recordings only use while they replay: fn needs no memory of its own.
  // fn must free what it allocates; if it keeps any, the recordings go (recorded again when needed).
  void beside_recordings(const std::function<void()>& fn);

  // The images buffer that the recordings of inputs with these sizes, strides and options read: an
  // input made there (micro_step's x is this very tensor) is not copied before a replay.
  Tensor input_buffer(at::IntArrayRef sizes, at::IntArrayRef strides, const torch::TensorOptions& options);

  const RouteLog& log() const { return log_; }
  int64_t recordings() const { return static_cast<int64_t>(micro_.size()); }
  bool update_recorded() const { return update_.recorded(); }
  nlohmann::ordered_json summary() const;

 private:
  struct Recording;
  FitFacts facts(bool new_key) const;
  std::string key_of(const Tensor& x, const loss::PaddedTargets& targets) const;
  std::unique_ptr<Recording> record(const Tensor& x, const loss::PaddedTargets& targets, int warm_ups);
  // Forward, loss and backward of (x, targets) into step_grads_, as the recording runs them.
  void run_micro_step(const Tensor& x, const loss::PaddedTargets& targets, Recording& r);
  MicroStep eager_micro_step(const Tensor& x, const loss::PaddedTargets& targets);
  // AccumulateGrad's rule applied to step_grads_ (those r's backward defined).
  void accumulate(const std::vector<bool>& grad_defined);
  void allocate_step_grads();
  RecordingContext& micro_context();  // the micro-steps' context, made at first use
  bool record_update();
  void drop_if_kept(int64_t kept, const char* what);

  StepProgram program_;
  model::SegmentationModel model_;
  optim::Optimizer& optimizer_;
  optim::ModelEMA* ema_;
  Backend backend_;
  int64_t max_recordings_;
  bool keep_outputs_;
  RouteLog log_;
  bool record_on_second_use_;
  std::map<std::string, int64_t> eager_uses_;  // keys run eagerly and not yet recorded
  Tensor eager_items_;                         // an eager step's loss items, outside the pool
  std::vector<Tensor> params_;                 // the trainable parameters, the backward's leaves
  std::vector<Tensor> grad_bufs_;              // gradients assigned on a first micro-step (persistent)
  std::vector<Tensor> step_grads_;             // a replayed micro-step's gradients, shared by all recordings
  std::map<std::string, Tensor> inputs_;       // the image buffer of each input signature, shared likewise
  std::unique_ptr<RecordingContext> micro_ctx_, update_ctx_;  // a pool for each kind
  std::map<std::string, std::unique_ptr<Recording>> micro_;
  std::vector<std::unique_ptr<Recording>> retired_;  // dropped, kept until the next capture
  bool micro_failed_ = false, update_failed_ = false;
  std::string failure_;  // the failed micro-step recording's error, first line
  int64_t recorded_total_ = 0, dropped_ = 0, update_replays_ = 0, update_native_ = 0, eager_steps_ = 0;
  double micro_record_s_ = 0, update_record_s_ = 0, eager_s_ = 0;
  std::vector<bool> update_grads_;  // which parameters had gradients when the update was recorded
  Graph update_;
};

}  // namespace lucid::replay
