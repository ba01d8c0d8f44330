// Pretrained weights into a model as the reference's BaseModel.load does (intersect_dicts): every
// tensor whose name and shape match is copied, the rest keep their initialisation (e.g. the class
// branches when the dataset's nc differs from the weights').
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lucid::model {

struct TransferReport {
  int64_t transferred = 0;        // tensors copied
  int64_t total = 0;              // tensors of the model's state dict
  std::vector<std::string> kept;  // model tensors left at their initialisation
};

TransferReport transfer_weights(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& weights);

}  // namespace lucid::model
