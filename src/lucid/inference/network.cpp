#include "lucid/inference/network.h"

#include "lucid/util/device.h"

namespace lucid::engine {

NetworkOutputs EagerNetwork::run(const Tensor& images, int64_t max_det, bool agnostic) {
  torch::NoGradGuard no_grad;
  auto x = device_.is_cuda() ? images.contiguous(torch::MemoryFormat::ChannelsLast) : images;
  if (model_.is_training()) model_.eval();  // only when needed: recorders run forwards on other threads
  model::HeadOutputs out;
  {
    util::Autocast ac(device_.is_cuda() && amp_);
    out = model_.forward(x);
  }
  auto f32 = [](const Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  auto to_fp32 = [&](const model::BranchOutputs& b) {
    return model::BranchOutputs{f32(b.boxes), f32(b.scores), f32(b.mask_coefficient), f32(b.proto), f32(b.semantic)};
  };
  out.one2many = to_fp32(out.one2many);
  if (out.one2one) out.one2one = to_fp32(*out.one2one);
  auto pred = one_to_one_ ? model_.decode(out, max_det, agnostic) : one_to_many_dense(model_, out);
  return {pred, out.primary().proto};
}

bool EagerNetwork::end2end() const { return one_to_one_; }
int64_t EagerNetwork::nc() const { return model_.nc(); }

std::vector<Tensor> network_detections(const Network& network, const NetworkOutputs& out, NmsOptions options) {
  if (network.end2end()) return select_end2end(out.pred, options.conf, options.max_det, options.classes);
  options.nc = network.nc();
  options.xywh = true;
  return non_max_suppression(out.pred, options);
}

}  // namespace lucid::engine
