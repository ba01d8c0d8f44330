// GPU checks of the model: CUDA FP32 agrees with the CPU, and a BF16-autocast channels_last training
// step runs with finite gradients. Skipped where no CUDA device is present.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "lucid/model/model.h"
#include "lucid/util/device.h"

using namespace lucid;

TEST(ModelGpu, CudaFp32MatchesCpu) {
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml"));
  m->eval();
  auto x = torch::rand({2, 3, 320, 320});
  torch::NoGradGuard no_grad;
  auto cpu = m->decode(m->forward(x));
  auto cpu_dense = m->head()->decode_dense(m->forward(x), m->strides());
  m->to(torch::kCUDA);
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  auto gpu_dense = m->head()->decode_dense(m->forward(x.cuda()), m->strides()).cpu();
  auto rel = ((gpu_dense - cpu_dense).abs().max() / cpu_dense.abs().max()).item<double>();
  EXPECT_LT(rel, 1e-4);
  EXPECT_EQ(cpu.sizes(), m->decode(m->forward(x.cuda())).sizes());
}

TEST(ModelGpu, Bf16ChannelsLastTrainingStep) {
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml"));
  m->to(torch::kCUDA);
  model::use_channels_last(*m);
  m->train();
  auto x = torch::rand({4, 3, 640, 640}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  auto out = m->forward(x);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  EXPECT_EQ(out.one2many.scores.scalar_type(), torch::kBFloat16);
  auto loss = out.one2many.scores.to(torch::kFloat).sigmoid().mean() +
              out.one2many.proto.to(torch::kFloat).pow(2).mean() + out.one2one->boxes.to(torch::kFloat).abs().mean() +
              out.one2many.semantic.to(torch::kFloat).mean();
  loss.backward();
  int64_t with_grad = 0;
  for (const auto& p : m->named_parameters()) {
    if (!p.value().grad().defined()) continue;
    ++with_grad;
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
  }
  EXPECT_GT(with_grad, 100);
  // The one-to-one branch sees detached features: its loss term must not reach the backbone alone,
  // but the backbone still gets gradients from the one-to-many terms here.
  EXPECT_TRUE(m->named_parameters()["model.0.conv.weight"].grad().defined());
}
