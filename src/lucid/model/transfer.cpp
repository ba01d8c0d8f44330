#include "lucid/model/transfer.h"

#include "lucid/model/model.h"

namespace lucid::model {

TransferReport transfer_weights(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& weights) {
  TransferReport r;
  torch::NoGradGuard no_grad;
  for (auto& [name, dst] : state_dict(module)) {
    ++r.total;
    auto it = weights.find(name);
    if (it == weights.end() || it->second.sizes() != dst.sizes()) {
      r.kept.push_back(name);
      continue;
    }
    dst.copy_(it->second.to(dst.dtype()));
    ++r.transferred;
  }
  return r;
}

}  // namespace lucid::model
