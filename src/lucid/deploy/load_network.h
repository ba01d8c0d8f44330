// A network ready to predict from a model file of any kind: a weights file lucid reads (the eager
// model, inference/network.h), a TorchScript file (torchscript_model) or a compiled package (.pt2,
// compiled_model), told apart by content.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lucid/inference/network.h"
#include "lucid/model/model.h"

namespace lucid::engine {

// A network from a weights file of any kind lucid reads, a compiled package (.pt2), a TorchScript
// file, or a file a registered loader takes (below), with the
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

// Model files run by another runtime, by file suffix: the Python package registers ".onnx" (an
// onnxruntime session behind engine::Network). Without a loader an .onnx file is refused with the
// way to run it. Errors name option=path.
using NetworkLoader =
    std::function<LoadedNetwork(const std::string& option, const std::string& path, const torch::Device& device)>;
void register_network_loader(const std::string& suffix, NetworkLoader loader);

// Whether load_network runs path as an exported file (a TorchScript file, a compiled package, a
// file of a registered loader's suffix, an ONNX file) rather than as weights.
bool is_exported_network(const std::string& path);

}  // namespace lucid::engine
