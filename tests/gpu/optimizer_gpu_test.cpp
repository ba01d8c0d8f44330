// The GPU's AdamW and Adam (torch's fused multi-tensor kernel) against the CPU's per-tensor steps,
// which give the reference's bytes (oracle.test_optim_oracle): three steps from the same state on a
// channels-last model, parameters and moments within the oracle's 1e-6 relative.
#include <gtest/gtest.h>

#include "lucid/config/model_yaml.h"
#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"

using namespace lucid;

namespace {

double relative_difference(const torch::Tensor& ours, const torch::Tensor& ref) {
  auto r = ref.to(torch::kDouble);
  const double scale = std::max(r.abs().max().item<double>(), 1e-12);
  return (ours.cpu().to(torch::kDouble) - r).abs().max().item<double>() / scale;
}

TEST(OptimizerGpu, FusedAdamFamilyAgreesWithTheCpuSteps) {
  for (const auto kind : {optim::Kind::AdamW, optim::Kind::Adam}) {
    torch::manual_seed(0);
    const auto spec = config::load_model_spec("yolo26n-seg.yaml", 4);
    model::SegmentationModel cpu(spec), gpu(spec);
    {
      torch::NoGradGuard no_grad;
      auto src = model::state_dict(*cpu), dst = model::state_dict(*gpu);
      for (size_t i = 0; i < src.size(); ++i) dst[i].second.copy_(src[i].second);
    }
    gpu->to(torch::kCUDA);
    model::use_channels_last(*gpu);
    optim::Optimizer on_cpu(kind, optim::build_param_groups(*cpu, kind, 0.01, 0.937, 5e-4));
    optim::Optimizer on_gpu(kind, optim::build_param_groups(*gpu, kind, 0.01, 0.937, 5e-4));
    auto cpu_params = on_cpu.parameters(), gpu_params = on_gpu.parameters();
    ASSERT_EQ(cpu_params.size(), gpu_params.size());
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        auto grad = torch::randn(cpu_params[i].sizes()) * 0.1;
        cpu_params[i].mutable_grad() = grad;
        gpu_params[i].mutable_grad() = torch::empty_like(gpu_params[i]).copy_(grad);
      }
      for (auto* opt : {&on_cpu, &on_gpu})
        for (size_t g = 0; g < opt->groups().size(); ++g) opt->set_hyper(g, 0.01 * (1 + 0.3 * k), 0.937);
      on_cpu.step();
      on_gpu.step();
    }
    double worst = 0;
    for (size_t i = 0; i < cpu_params.size(); ++i)
      worst = std::max(worst, relative_difference(gpu_params[i].detach(), cpu_params[i].detach()));
    auto cpu_state = on_cpu.state(), gpu_state = on_gpu.state();
    ASSERT_EQ(cpu_state.size(), gpu_state.size());
    for (size_t i = 0; i < cpu_state.size(); ++i) {
      ASSERT_EQ(cpu_state[i].first, gpu_state[i].first);
      worst = std::max(worst, relative_difference(gpu_state[i].second, cpu_state[i].second));
    }
    EXPECT_LE(worst, 1e-6) << optim::kind_name(kind);
  }
}

}  // namespace
