#include "lucid/train/device_warm_up.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <chrono>

#include "lucid/model/model.h"
#include "lucid/util/device.h"

namespace lucid::engine {

std::vector<int64_t> epoch_batch_sizes(int64_t images, int64_t batch) {
  std::vector<int64_t> out;
  if (images <= 0 || batch <= 0) return out;
  out.push_back(std::min(images, batch));
  if (images > batch && images % batch) out.push_back(images % batch);
  return out;
}

void use_fit_algorithms(bool deterministic) {
  if (!deterministic) return;
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  // Not PyTorch's fill of every new tensor with NaN that comes with it: a debugging aid costing a
  // write of each allocation (most of deterministic=True's time on the CPU), and lucid reads no
  // memory it has not written (the same-seed byte tests hold without it).
  at::globalContext().setDeterministicFillUninitializedMemory(false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

namespace {

// Every prediction the loss reads, summed in FP32: its backward reaches every trainable layer.
torch::Tensor total_of(const model::HeadOutputs& out) {
  auto total = torch::zeros({}, out.one2many.boxes.options().dtype(torch::kFloat));
  auto add = [&](const model::BranchOutputs& b) {
    for (const auto* t : {&b.boxes, &b.scores, &b.mask_coefficient, &b.proto, &b.semantic})
      if (t->defined()) total = total + t->to(torch::kFloat).sum();
  };
  add(out.one2many);
  if (out.one2one) add(*out.one2one);
  return total;
}

}  // namespace

double warm_up_device(const WarmUpRequest& request) {
  if (!request.device.is_cuda() || request.batches.empty()) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  use_fit_algorithms(request.deterministic);
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto generator_state = generator.get_state();  // the scratch network's initialisation draws from it
  {
    model::SegmentationModel net(request.spec);
    generator.set_state(generator_state);
    net->to(request.device);
    model::use_channels_last(*net);
    net->train();
    for (const int64_t b : request.batches) {
      auto x = torch::zeros({b, 3, request.imgsz, request.imgsz}, torch::TensorOptions(request.device))
                   .contiguous(at::MemoryFormat::ChannelsLast);
      torch::Tensor total;
      {
        util::Autocast autocast(request.autocast);
        total = total_of(net->forward(x));
      }
      util::Autocast autocast_off(false);  // backward passes run outside autocast, as a fit's
      total.backward();
    }
  }
  // The scratch network's memory goes back to the device rather than staying cached beside what
  // the fit reserves (its recordings' pool).
  c10::cuda::CUDACachingAllocator::emptyCache();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lucid::engine
