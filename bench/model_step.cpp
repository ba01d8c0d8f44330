// Network step benchmark: yolo26n-seg (or model=...) forward + backward with a trivial loss, native
// execution, on CUDA under BF16 autocast and channels_last (FP32 on the CPU). Prints ms per step as
// median (min-max) over timed steps after warm-up.
//   bench_model_step [model=yolo26n-seg.yaml] [batch=4,16] [imgsz=640] [steps=50] [warmup=10]
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include "lucid/config/options.h"
#include "lucid/model/model.h"
#include "lucid/util/device.h"
#include "lucid/util/stats.h"


using namespace lucid;

namespace {

torch::Tensor trivial_loss(const model::HeadOutputs& o) {
  auto branch = [](const model::BranchOutputs& b) {
    auto l = b.boxes.to(torch::kFloat).mean() + b.scores.to(torch::kFloat).mean() + b.mask_coefficient.to(torch::kFloat).mean() + b.proto.to(torch::kFloat).mean();
    if (b.semantic.defined()) l = l + b.semantic.to(torch::kFloat).mean();
    return l;
  };
  auto loss = branch(o.one2many);
  if (o.one2one) loss = loss + branch(*o.one2one);
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  config::Options o("bench_model_step", {{"model", "yolo26n-seg.yaml", "model YAML"},
                                          {"batch", "4,16", "comma-separated batch sizes"},
                                          {"imgsz", "640", "square input size"},
                                          {"steps", "50", "timed steps"},
                                          {"warmup", "10", "untimed warm-up steps"},
                                          {"device", "cuda", "cuda or cpu"}});
  o.parse(std::vector<std::string>(argv + 1, argv + argc));
  const bool cuda = o.str("device") == "cuda" && util::cuda_usable();
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (cuda) at::globalContext().setBenchmarkCuDNN(true);
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec(o.str("model")));
  m->to(device);
  if (cuda) model::use_channels_last(*m);
  m->train();
  std::vector<torch::Tensor> params;
  for (auto& p : m->parameters())
    if (p.requires_grad()) params.push_back(p);
  std::stringstream batches(o.str("batch"));
  std::string item;
  std::cout << "model " << o.str("model") << ", " << (cuda ? "cuda bf16 autocast channels_last" : "cpu fp32")
            << ", imgsz " << o.integer("imgsz") << ", native\n";
  while (std::getline(batches, item, ',')) {
    const int64_t b = std::stoll(item), s = o.integer("imgsz");
    auto x = torch::rand({b, 3, s, s}, torch::TensorOptions().device(device));
    if (cuda) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    std::vector<double> ms;
    const int64_t warm = o.integer("warmup"), steps = o.integer("steps");
    for (int64_t i = 0; i < warm + steps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      torch::Tensor loss;
      {
        if (cuda) {
          at::autocast::set_autocast_enabled(at::kCUDA, true);
          at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
        }
        loss = trivial_loss(m->forward(x));
        if (cuda) {
          at::autocast::set_autocast_enabled(at::kCUDA, false);
          at::autocast::clear_cache();
        }
      }
      loss.backward();
      if (cuda) torch::cuda::synchronize();
      auto t1 = std::chrono::steady_clock::now();
      if (i >= warm) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    const auto step = lucid::util::spread(ms);
    std::printf("batch %3lld: %.2f ms/step median (%.2f-%.2f) over %zu steps, %.0f images/s\n",
                static_cast<long long>(b), step.median, step.min, step.max, ms.size(), 1000.0 * b / step.median);
  }
  return 0;
}
