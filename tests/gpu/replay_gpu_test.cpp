// Stage replay through CUDA graphs on the GPU, against native execution, byte for byte after every
// batch: every prediction and gradient (and whether it exists), the loss items, parameters,
// BatchNorm statistics and optimizer state, over batches with changing instance counts, a batch
// without instances, a partial batch (native, no new recording; capture_step records it) and
// accumulation, with the EMA. BF16 autocast,
// channels_last and the deterministic settings, as `lucid train` runs on a GPU. A native-native
// control runs first: if it differs, the cause is determinism, not replay.
#include <gtest/gtest.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include "lucid/util/device.h"
#include "replay_harness.h"

using namespace lucid;
using namespace lucid::replay_harness;

namespace {

FitSetup gpu_setup() {
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  FitSetup s;
  s.device = torch::Device(torch::kCUDA, 0);
  s.backend = Backend::CudaGraph;
  s.autocast = true;
  s.imgsz = 256;
  return s;
}

TEST(ReplayGpu, NativeTwiceIsIdentical) { compare_with_native(std::nullopt, optim::Kind::MuSGD, gpu_setup()); }

TEST(ReplayGpu, AllStagesMuSGD) {
  compare_with_native(ReplayOptions{true, true, true}, optim::Kind::MuSGD, gpu_setup());
}
TEST(ReplayGpu, SharedFeaturesOnly) {
  compare_with_native(ReplayOptions{true, false, false}, optim::Kind::MuSGD, gpu_setup());
}
TEST(ReplayGpu, HeadPredictionsOnly) {
  compare_with_native(ReplayOptions{false, true, false}, optim::Kind::MuSGD, gpu_setup());
}
TEST(ReplayGpu, OptimizerOnlySgdAndAdamW) {
  compare_with_native(ReplayOptions{false, false, true}, optim::Kind::SGD, gpu_setup());
  compare_with_native(ReplayOptions{false, false, true}, optim::Kind::AdamW, gpu_setup());
}

// capture_step: the whole step (forward, loss, backward; clipping, optimizer stages, EMA) recorded
// per input signature, every batch replayed (the partial and the empty batch included).
TEST(ReplayGpu, WholeStepMuSGD) {
  compare_with_native(ReplayOptions{false, false, false, true}, optim::Kind::MuSGD, gpu_setup());
}
TEST(ReplayGpu, WholeStepSgdAndAdamW) {
  compare_with_native(ReplayOptions{false, false, false, true}, optim::Kind::SGD, gpu_setup());
  compare_with_native(ReplayOptions{false, false, false, true}, optim::Kind::AdamW, gpu_setup());
}

// As fits run: no outputs kept, a key's first use run eagerly in the recordings' pool and the key
// recorded at its second use without a warm-up pass. Two passes over the schedule: the first runs
// four keys eagerly and replays one, the second records the other three and replays every step.
TEST(ReplayGpu, WholeStepRecordedAtItsSecondUse) {
  auto setup = gpu_setup();
  setup.keep_step_outputs = false;
  setup.record_on_second_use = true;
  Fit native(std::nullopt, optim::Kind::MuSGD, "", setup);
  Fit fit(ReplayOptions{false, false, false, true}, optim::Kind::MuSGD, "", setup);
  expect_fits_match(native, fit, setup.imgsz);
  expect_fits_match(native, fit, setup.imgsz);
  const auto s = fit.step_recorder()->summary();
  EXPECT_EQ(s["eager_steps"], 4);
  EXPECT_EQ(s["recorded_total"], 4);
  EXPECT_EQ(s["replayed_steps"], 6);
  EXPECT_EQ(s["dropped"], 0);
}

// The rest of the whole-step recording on its own, with a stand-in loss: forward, backward into
// accumulated gradients, clipping, optimizer stages and EMA as CUDA graphs.
TEST(ReplayGpu, WholeStepWithAStandInLoss) {
  auto setup = gpu_setup();
  setup.loss = simple_loss_fns();
  compare_with_native(ReplayOptions{false, false, false, true}, optim::Kind::MuSGD, setup);
  compare_with_native(ReplayOptions{false, false, false, true}, optim::Kind::AdamW, setup);
}

TEST(ReplayGpu, RecordingsReleasedWithTheRecorder) {
  // Recording, releasing and recording again does not grow reserved memory: each recorder's pools
  // go with it.
  auto setup = gpu_setup();
  auto cycle = [&] {
    {
      Fit fit(ReplayOptions{true, true, true}, optim::Kind::MuSGD, "", setup);
      auto b = schedule(setup.imgsz);
      fit.run(b[0].x, b[0].targets, true);
      fit.run(b[2].x, b[2].targets, true);
      EXPECT_TRUE(fit.recorder()->network_recorded());
    }
    torch::cuda::synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    return util::cuda_memory().reserved_mib;
  };
  const double first = cycle(), second = cycle(), third = cycle();
  EXPECT_LE(second, first + 2.0) << "reserved after cycles: " << first << ", " << second << ", " << third << " MiB";
  EXPECT_LE(third, second + 2.0) << "reserved after cycles: " << first << ", " << second << ", " << third << " MiB";
}

}  // namespace
