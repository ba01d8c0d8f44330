// Ultralytics `.pt` checkpoints (torch.save of a dict holding a pickled SegmentationModel) read
// natively: the zip archive (torch_zip.h), the restricted pickle machine (torch_pickle.h), then
// the state dict of the entry the reference loads, walked the way torch's state_dict() walks it.
#pragma once
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lucid::model {

// What an Ultralytics checkpoint holds for lucid: the state dict of the entry the reference loads
// (`ema` when present and not None, else `model`), with its model YAML and class names.
struct UltralyticsWeights {
  std::map<std::string, torch::Tensor> state;  // names as the reference's state_dict(); CPU, dtype as stored
  std::string entry;                           // "ema" or "model"
  std::string yaml;                            // the module's `yaml` dict as JSON text ("" if absent)
  std::vector<std::string> names;              // class names by index (model.names), empty if absent
  nlohmann::json train_args;                   // the checkpoint's train_args (null if absent)
};

// True when the file starts like a zip archive (PyTorch's format), without reading further.
bool is_torch_zip(const std::string& path);

// Reads the checkpoint; every malformed, truncated or unsupported construct is a UserError naming the file.
UltralyticsWeights read_ultralytics_pt(const std::string& path);

}  // namespace lucid::model
