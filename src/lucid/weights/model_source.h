// What a `model=` (or `pretrained=`, `weights=`) file holds, told apart by content: a model YAML, an
// Ultralytics `.pt` checkpoint, plain weights in a `.safetensors` file (with or without the
// metadata `lucid export` writes) or a lucid training checkpoint. Every command resolves its model
// file here, so each kind works everywhere and a wrong kind of file gets one clear error.
//
// Metadata of lucid's weights files (`lucid export format=safetensors`, `lucid model save`, training
// checkpoints): `yaml` the model dict as JSON (config::ModelSpec::yaml), `nc`, `names` (a JSON list),
// `imgsz`; training checkpoints add `lucid` (the run state, weights/checkpoint.h).
#pragma once
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lucid/config/model_yaml.h"
#include "lucid/model/model.h"

namespace lucid::engine {

enum class ModelFileKind { Yaml, UltralyticsPt, Weights, TrainingCheckpoint };
std::string kind_name(ModelFileKind kind);

struct ModelSource {
  std::string option;  // "model", "pretrained", "weights": for errors
  std::string file;    // as given
  ModelFileKind kind = ModelFileKind::Yaml;
  std::optional<config::ModelSpec> spec;         // absent only for plain weights without a `yaml`
  std::vector<std::string> names;                // class names by index; empty when the file has none
  std::map<std::string, torch::Tensor> weights;  // state-dict names (EMA for training checkpoints); CPU
  int64_t imgsz = 0;                             // 0: the file does not say
  std::string data;                              // "": the file does not say
  std::optional<bool> overlap_mask;              // the training run's, where known
  nlohmann::ordered_json train_args;             // training checkpoints: the run's options (strings)

  bool has_weights() const { return kind != ModelFileKind::Yaml; }
  // The spec, or an error naming the file when it holds weights without an architecture.
  const config::ModelSpec& require_spec() const;
  // The architecture for nc classes (nc < 0: the file's own).
  config::ModelSpec spec_for_classes(int nc) const;
};

// Which kind of file `path` is (for option `option`), by its first bytes; a file that is none of the
// four kinds is an error naming it. A name that is not a file is a model YAML to look up (models/).
ModelFileKind detect_model_file(const std::string& option, const std::string& path);

// Reads the file: its architecture, class names, weights (unless weights=false), imgsz and data. A
// released weights name (yolo26n-seg.pt, yolo11s-seg.pt, yolov8x-seg.pt ...) absent from the working
// folder is read from the settings' weights_dir, as the reference looks there.
ModelSource read_model_source(const std::string& option, const std::string& path, bool weights = true);

// A trained model ready for validation and prediction, from any kind of weights file.
struct InferenceModel {
  model::SegmentationModel model{nullptr};
  ModelSource source;  // names, imgsz, data, overlap_mask (weights released)
};
InferenceModel load_inference_model(const std::string& option, const std::string& path, const torch::Device& device);

// Writes plain weights with the metadata above (FP16 floating tensors when half), atomically.
void write_weights_file(const std::string& path, const model::SegmentationModelImpl& model,
                        const std::vector<std::string>& names, int64_t imgsz, bool half);

}  // namespace lucid::engine
