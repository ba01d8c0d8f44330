// A network ready to predict from a model file of any kind: a weights file lucid reads (the eager
// model, inference/network.h), a TorchScript file (torchscript_model) or a compiled package (.pt2,
// compiled_model), told apart by content.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lucid/inference/network.h"
#include "lucid/model/model.h"

namespace lucid::engine {

// A network from a weights file of any kind lucid reads, or a compiled package (.pt2), with the
// class names (the file's, else "class<i>") and the input size it records (0: none). nms selects the
// head of a weights file's model (EagerNetwork); a package runs the head it was compiled with.
struct LoadedNetwork {
  model::SegmentationModel model{nullptr};  // the eager model network runs (unset for a package)
  std::unique_ptr<Network> network;
  std::vector<std::string> names;
  int64_t imgsz = 0;
  bool fixed_imgsz = false;  // a compiled package: imgsz is the only input size it takes
};
LoadedNetwork load_network(const std::string& option, const std::string& path, const torch::Device& device, bool amp,
                           const std::optional<bool>& nms = std::nullopt);

}  // namespace lucid::engine
