// The training step's forward, backward, gradient clipping, optimizer stages and EMA update run
// without a single host synchronisation (CUDA sync debug mode set to error), as stage recording
// needs. The loss is outside this check: its data-dependent shapes keep it native.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include "lucid/model/model.h"
#include "lucid/optim/ema.h"
#include "lucid/optim/optimizer.h"
#include "lucid/util/device.h"

using namespace lucid;

namespace {

torch::Tensor trivial_loss(const model::HeadOutputs& o) {
  auto l = o.one2many.scores.to(torch::kFloat).sigmoid().mean() + o.one2many.proto.to(torch::kFloat).pow(2).mean() +
           o.one2many.mask_coefficient.to(torch::kFloat).mean() + o.one2many.boxes.to(torch::kFloat).abs().mean();
  if (o.one2many.semantic.defined()) l = l + o.one2many.semantic.to(torch::kFloat).mean();
  if (o.one2one) l = l + o.one2one->scores.to(torch::kFloat).mean();
  return l;
}

}  // namespace

TEST(FitGpu, StepStagesDoNotSynchronise) {
  for (const auto kind : {optim::Kind::MuSGD, optim::Kind::SGD, optim::Kind::AdamW}) {
    torch::manual_seed(0);
    model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml"));
    m->to(torch::kCUDA);
    model::use_channels_last(*m);
    m->train();
    optim::Optimizer opt(kind, optim::build_param_groups(*m, kind, 0.01, 0.937, 5e-4));
    optim::ModelEMA ema(m);
    std::vector<torch::Tensor> params;
    for (auto& p : m->parameters())
      if (p.requires_grad()) params.push_back(p);
    auto x = torch::rand({4, 3, 320, 320}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
    auto step = [&](int i) {
      model::HeadOutputs out;
      {
        util::Bf16Autocast ac(true);
        out = m->forward(x);
      }
      trivial_loss(out).backward();
      optim::clip_grad_norm(params, 10.0);
      for (size_t g = 0; g < opt.groups().size(); ++g) opt.set_hyper(g, 0.01 * (i + 1), 0.9);
      opt.step();
      opt.zero_grad();
      ema.update(m);
    };
    step(0);  // first use: library handles and workspaces
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
    try {
      step(1);
      step(2);
    } catch (const std::exception& e) {
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
      FAIL() << optim::kind_name(kind) << ": a host synchronisation: " << e.what();
    }
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    torch::cuda::synchronize();
    for (const auto& p : m->parameters()) ASSERT_TRUE(torch::isfinite(p).all().item<bool>());
  }
}
