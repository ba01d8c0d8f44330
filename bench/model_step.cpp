// Network step benchmark: yolo26n-seg (or model=...) forward + backward with a trivial loss, on CUDA
// under BF16 autocast and channels_last (FP32 on the CPU), natively and (mode=graph, CUDA only)
// recorded once as one CUDA graph and replayed: the network's own floor, which the training step is
// measured against. Prints ms per step as median (min-max) over timed steps after warm-up.
//   bench_model_step [model=yolo26n-seg.yaml] [batch=4,16] [imgsz=640] [steps=50] [warmup=10]
//                    [mode=native,graph] [kernel_times=0] [kernel_rows=40]
// kernel_times=N: after the timed steps, N more under the kernel clock (util/kernel_times.h): the
// floor's kernel_rows costliest kernels, to set beside a fit's `kernel_times` table.
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include "lucid/config/options.h"
#include "lucid/model/model.h"
#include "lucid/replay/graph.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/kernel_times.h"
#include "lucid/util/stats.h"

using namespace lucid;

namespace {

torch::Tensor trivial_loss(const model::HeadOutputs& o) {
  auto branch = [](const model::BranchOutputs& b) {
    auto l = b.boxes.to(torch::kFloat).mean() + b.scores.to(torch::kFloat).mean() +
             b.mask_coefficient.to(torch::kFloat).mean() + b.proto.to(torch::kFloat).mean();
    if (b.semantic.defined()) l = l + b.semantic.to(torch::kFloat).mean();
    return l;
  };
  auto loss = branch(o.one2many);
  if (o.one2one) loss = loss + branch(*o.one2one);
  return loss;
}

}  // namespace

int run(int argc, char** argv) {
  config::Options o("bench_model_step", {{"model", "yolo26n-seg.yaml", "model YAML"},
                                         {"batch", "4,16", "comma-separated batch sizes"},
                                         {"imgsz", "640", "square input size"},
                                         {"steps", "50", "timed steps"},
                                         {"warmup", "10", "untimed warm-up steps"},
                                         {"device", "cuda", "cuda or cpu"},
                                         {"mode", "native", "comma-separated: native, graph (CUDA)"},
                                         {"deterministic", "False",
                                          "the fit's deterministic settings (cuDNN deterministic, no benchmark); "
                                          "False: cuDNN benchmark picks the fastest convolutions"},
                                         {"kernel_times", "0", "steps profiled kernel by kernel after the timed ones"},
                                         {"kernel_rows", "40", "the costliest kernels listed"}});
  o.parse(std::vector<std::string>(argv + 1, argv + argc));
  const bool cuda = o.str("device") == "cuda" && util::cuda_usable();
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (cuda && o.flag("deterministic")) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  } else if (cuda) {
    at::globalContext().setBenchmarkCuDNN(true);
  }
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec(o.str("model")));
  m->to(device);
  if (cuda) model::use_channels_last(*m);
  m->train();
  std::vector<torch::Tensor> params;
  for (auto& p : m->parameters())
    if (p.requires_grad()) params.push_back(p);
  std::vector<std::string> modes;
  {
    std::stringstream list(o.str("mode"));
    for (std::string m; std::getline(list, m, ',');) {
      if (m != "native" && m != "graph")
        throw lucid::UserError("option mode=" + o.str("mode") + ": expected native or graph");
      if (m == "graph" && !cuda) throw lucid::UserError("option mode=graph needs a CUDA device");
      modes.push_back(m);
    }
  }
  std::cout << "model " << o.str("model") << ", " << (cuda ? "cuda bf16 autocast channels_last" : "cpu fp32")
            << (o.flag("deterministic") ? ", deterministic" : ", cudnn benchmark") << ", imgsz " << o.integer("imgsz")
            << "\n";
  std::stringstream batches(o.str("batch"));
  std::string item;
  while (std::getline(batches, item, ',')) {
    const int64_t b = std::stoll(item), s = o.integer("imgsz");
    auto x = torch::rand({b, 3, s, s}, torch::TensorOptions().device(device));
    if (cuda) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    // One step: gradients reset (so that a recording allocates them in its pool), forward, backward.
    auto step = [&] {
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      torch::Tensor loss;
      {
        util::Autocast ac(cuda);
        loss = trivial_loss(m->forward(x));
      }
      loss.backward();
    };
    for (const auto& mode : modes) {
      std::vector<double> ms;
      const int64_t warm = o.integer("warmup"), steps = o.integer("steps");
      std::unique_ptr<replay::RecordingContext> ctx;
      replay::Graph graph;
      if (mode == "graph") {
        ctx = std::make_unique<replay::RecordingContext>(replay::Backend::CudaGraph);
        ctx->on_capture_stream([&] {
          for (int k = 0; k < 3; ++k) step();
        });
        graph.capture(*ctx, ctx->pool(), step);
      }
      for (int64_t i = 0; i < warm + steps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        if (mode == "graph")
          graph.replay();
        else
          step();
        if (cuda) torch::cuda::synchronize();
        auto t1 = std::chrono::steady_clock::now();
        if (i >= warm) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      const auto t = lucid::util::spread(ms);
      std::printf("batch %3lld %-6s: %.2f ms/step median (%.2f-%.2f) over %zu steps, %.0f images/s\n",
                  static_cast<long long>(b), mode.c_str(), t.median, t.min, t.max, ms.size(), 1000.0 * b / t.median);
      if (const int64_t profiled = o.integer("kernel_times"); profiled > 0 && cuda) {
        util::KernelClock clock;
        for (int64_t i = 0; i < profiled; ++i) mode == "graph" ? graph.replay() : step();
        const int64_t rows = o.integer("kernel_rows");
        std::cout << util::KernelClock::table(clock.stop(profiled, rows), static_cast<size_t>(rows)) << std::flush;
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model_step: %s\n", e.what());
    return 2;
  }
}
