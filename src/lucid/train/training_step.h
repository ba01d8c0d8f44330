// One training step, the unit that Trainer::fit(), the replay test harness and the GPU sync test
// all run: upload with device HSV and scaling, forward under the fit's autocast, loss, backward
// accumulating into the gradients, and at the accumulation boundary gradient clipping, the optimizer
// stages, zero_grad and the EMA update.
//
// How it executes is the step's variant, chosen per fit from the replay options and per step by
// the routes (replay/route.h): natively; with the stage recordings (capture_network,
// capture_segment_heads, capture_optimizer: replay::StageRecorder); or as whole-step recordings
// (capture_step: replay::StepRecorder), whose native fallback is the stage-recorded or native step.
// Every variant runs the same model, loss, optimizer and EMA code in the same order, so each writes
// the same bytes.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <memory>
#include <optional>

#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/model.h"
#include "lucid/optim/ema.h"
#include "lucid/optim/optimizer.h"
#include "lucid/replay/recorder.h"
#include "lucid/replay/step_recorder.h"
#include "lucid/train/batch_upload.h"

namespace lucid::engine {

struct StepSettings {
  torch::Device device{torch::kCPU};
  bool autocast = false;        // BF16 forward (CUDA)
  bool hsv = false;             // device HSV for batches that carry gains
  double max_grad_norm = 10.0;  // gradient clipping
  replay::ReplayOptions replay;
  replay::Backend backend = replay::Backend::CudaGraph;
  int64_t max_step_recordings = 16;  // capture_step: micro-step recordings held at once
  bool keep_step_outputs = false;    // capture_step: each recording keeps its forward's outputs
  // capture_step: a key's first micro-step runs eagerly and the key is recorded at its second use
  // (replay::StepRecorder); off, every key is recorded at its first use.
  bool record_on_second_use = true;
  // capture_step: the batch's input goes straight into the recordings' buffer (multi_scale off:
  // the input is trained at the size it is made).
  bool input_into_recording = true;
  bool print = true;  // route reasons and recordings on stdout
  // Data parallel: the gradient all-reduce, run first at every optimizer step (before clipping;
  // inside the update's recording under capture_step).
  std::function<void()> reduce_gradients;
  // Data parallel: told before each micro-step whether the optimizer step follows it (the overlapped
  // all-reduce runs in that micro-step's backward only).
  std::function<void(bool final_micro_step)> before_micro_step;
};

// Where a training iteration stands in gradient accumulation: the schedule's count (the warmup
// ramps it), whether it is fixed yet, and the iteration of the last optimizer step (the run state,
// checkpointed).
struct Accumulation {
  int64_t accumulate = 1;
  bool fixed = true;
  int64_t& last_opt_step;
};

struct StepLoss {
  model::HeadOutputs outputs;  // valid until the next step (a replay's are its static buffers, empty unless kept)
  torch::Tensor items;         // (5) loss items on the device, detached
};

// The loss a step backpropagates, in its two halves: the batch targets padded on the host to their
// instance capacity bucket, and the loss of the model's outputs on those targets on the device
// (no host read: recordable).
struct StepLossFns {
  std::function<loss::PaddedTargets(const loss::SegTargets&, int64_t batch, double height, double width)> pad;
  std::function<loss::LossResult(const model::HeadOutputs&, const loss::PaddedTargets&)> loss;
};

class TrainingStep {
 public:
  // ema may be null (no EMA update).
  TrainingStep(model::SegmentationModel model, loss::SegmentationLoss& loss, optim::Optimizer& optimizer,
               optim::ModelEMA* ema, StepSettings settings);
  // Another loss (tests: a stand-in, to check the rest of the step on its own).
  TrainingStep(model::SegmentationModel model, StepLossFns loss, optim::Optimizer& optimizer, optim::ModelEMA* ema,
               StepSettings settings);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // The network input of a batch: uint8 (B, 3, H, W) host images uploaded, device HSV with the
  // batch's gains (when on and given), scaled to [0, 1], channels_last on CUDA. On CUDA the host
  // images are copied on their own stream (BatchUpload), beside the steps queued before.
  torch::Tensor input(const torch::Tensor& images, const torch::Tensor& hsv_gains);

  // One training iteration ni: a micro-step and, at the accumulation boundary (ni - last_opt_step
  // >= accumulate, the reference's rule), the optimizer step, which moves last_opt_step to ni.
  struct Iteration {
    StepLoss loss;
    bool optimizer_stepped = false;
  };
  Iteration train(const torch::Tensor& x, const loss::SegTargets& targets, int64_t ni, Accumulation acc);

  // Whether the accumulation count is fixed (warmup over): the stage recordings wait for it.
  void set_accumulation_fixed(bool fixed);
  // Forward, loss and backward; gradients accumulate over micro-steps until optimizer_step().
  StepLoss micro_step(const torch::Tensor& x, const loss::SegTargets& targets);
  // Clipping, optimizer stages, zero_grad, EMA update.
  void optimizer_step();

  // The native pieces of micro_step (the GPU sync test runs them around its own loss).
  model::HeadOutputs forward(const torch::Tensor& x);  // under the fit's autocast; stage replay where it holds
  void backward(const torch::Tensor& total);           // outside autocast, accumulating into .grad

  // Runs fn (validation) between steps; with whole-step recordings its device memory comes from
  // their pool (StepRecorder::beside_recordings), so it adds nothing to what the fit reserves.
  void beside_steps(const std::function<void()>& fn);

  // Replay summary for fit_report.json: empty when no replay was requested.
  nlohmann::ordered_json replay_summary() const;
  replay::StageRecorder* stage_recorder() const { return stages_.get(); }
  replay::StepRecorder* step_recorder() const { return whole_.get(); }

 private:
  model::HeadOutputs native_forward(const torch::Tensor& x);
  void native_optimizer_step();
  void update();            // the optimizer step's device work after its uploads (recorded by capture_step)
  void reduce_gradients();  // data parallel (StepSettings::reduce_gradients)

  model::SegmentationModel model_;
  StepLossFns loss_;
  optim::Optimizer& optimizer_;
  optim::ModelEMA* ema_;
  StepSettings s_;
  std::vector<torch::Tensor> params_;  // trainable parameters (clipping)
  std::unique_ptr<replay::StageRecorder> stages_;
  std::unique_ptr<replay::StepRecorder> whole_;
  std::unique_ptr<BatchUpload> upload_;  // CUDA
};

// The loss items of each step, read on the host without a synchronisation inside the step: on CUDA
// each step's items are copied into pinned memory asynchronously and read one step later (or at
// drain()), when the copy has long finished.
class LossItemsReader {
 public:
  struct Step {
    std::array<float, loss::kLossTerms> items;
    int64_t epoch, batch, instances, size;
  };
  explicit LossItemsReader(const torch::Device& device);
  // Queues a step's items; returns the previous step's when they were pending (CUDA), or this one's (CPU).
  std::optional<Step> push(const torch::Tensor& items, Step info);
  // The step still pending, if any.
  std::optional<Step> drain();

 private:
  struct Pending;
  bool cuda_;
  std::shared_ptr<Pending> pending_;
};

}  // namespace lucid::engine
