// The optimizer's multi-tensor kernels on the GPU (optim/multi_tensor_cuda.h) against its per-tensor
// ops, which give the reference's bytes on the CPU (oracle.test_optim_oracle): SGD, MuSGD, AdamW
// and Adam, three steps from the same state on a channels-last model with changing lr and momentum:
// the same bytes of parameters and optimizer state (the kernels round where ATen's kernels round;
// MuSGD's BF16 orthogonalisation would turn any difference into a large one).
#include <gtest/gtest.h>

#include "lucid/config/model_yaml.h"
#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"

using namespace lucid;

namespace {

double relative_difference(const torch::Tensor& ours, const torch::Tensor& ref) {
  auto r = ref.to(torch::kDouble);
  const double scale = std::max(r.abs().max().item<double>(), 1e-12);
  return (ours.to(torch::kDouble) - r).abs().max().item<double>() / scale;
}

model::SegmentationModel gpu_model(const config::ModelSpec& spec) {
  torch::manual_seed(0);
  model::SegmentationModel m(spec);
  m->to(torch::kCUDA);
  model::use_channels_last(*m);
  return m;
}

TEST(OptimizerGpu, MultiTensorKernelsAgreeWithThePerTensorOps) {
  const auto spec = config::load_model_spec("yolo26n-seg.yaml", 4);
  for (const auto kind : {optim::Kind::SGD, optim::Kind::MuSGD, optim::Kind::AdamW, optim::Kind::Adam}) {
    auto a = gpu_model(spec), b = gpu_model(spec);
    optim::Optimizer multi(kind, optim::build_param_groups(*a, kind, 0.01, 0.937, 5e-4));
    optim::Optimizer per_tensor(kind, optim::build_param_groups(*b, kind, 0.01, 0.937, 5e-4));
    ASSERT_TRUE(multi.multi_tensor()) << optim::kind_name(kind);
    per_tensor.set_multi_tensor(false);
    auto pa = multi.parameters(), pb = per_tensor.parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < pa.size(); ++i) {
        auto grad = torch::randn(pa[i].sizes(), pa[i].options()) * 0.1;
        pa[i].mutable_grad() = torch::empty_like(pa[i]).copy_(grad);
        pb[i].mutable_grad() = torch::empty_like(pb[i]).copy_(grad);
      }
      // The Adam family's beta1 stays; the others' momentum warms.
      const double momentum = optim::uses_betas(kind) ? 0.937 : 0.8 + 0.05 * k;
      for (auto* opt : {&multi, &per_tensor})
        for (size_t g = 0; g < opt->groups().size(); ++g) opt->set_hyper(g, 0.01 * (1 + 0.3 * k), momentum);
      multi.step();
      per_tensor.step();
    }
    double worst = 0;
    for (size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, relative_difference(pa[i].detach(), pb[i].detach()));
    auto sa = multi.state(), sb = per_tensor.state();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      ASSERT_EQ(sa[i].first, sb[i].first);
      worst = std::max(worst, relative_difference(sa[i].second, sb[i].second));
    }
    EXPECT_LE(worst, 1e-6) << optim::kind_name(kind);
    std::printf("%s: worst relative difference %.3g\n", optim::kind_name(kind).c_str(), worst);
  }
}

}  // namespace
