// Ultralytics-schema model YAML: nc, reg_max, end2end, scales, and backbone/head rows of
// [from, repeats, module, args]. `yolo26n-seg.yaml` resolves to `yolo26-seg.yaml` with scale n.
#pragma once
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace lucid::config {

struct LayerRow {
  std::vector<int> from;  // -1 = previous layer
  int repeats = 1;
  std::string module;
  YAML::Node args;  // sequence, interpreted by the model builder
  int line = 0;     // 1-based line in the YAML, for errors
};

struct ModelSpec {
  std::string path;   // file the spec was read from
  std::string name;   // stem as asked for, e.g. "yolo26n-seg"
  std::string scale;  // "n", "s", ... or "" when the YAML has no scales
  int nc = 80;
  int reg_max = 16;
  bool end2end = false;
  double depth = 1.0, width = 1.0;
  int max_channels = 1 << 30;
  std::vector<LayerRow> layers;  // backbone then head
  // The model dict as JSON text with nc, scale and yaml_file resolved (what the reference stores as
  // `model.yaml` in its checkpoints): model_spec_from_text(yaml) rebuilds this spec without the file.
  std::string yaml;
};

// Finds the YAML (as given, else in the project's models/ folder, with or without the scale letter),
// reads it and applies the scale. nc_override >= 0 replaces the YAML's nc (the dataset's nc).
ModelSpec load_model_spec(const std::string& name_or_path, int nc_override = -1);

// A spec from model YAML text (JSON is YAML too, e.g. the dict a reference checkpoint stores).
// source names the text's origin in errors. The scale is the dict's `scale` key if present, else
// the letter in its `yaml_file` name, else the first scale.
ModelSpec model_spec_from_text(const std::string& text, const std::string& source, int nc_override = -1);

// The scale letter in a model name (yolo26n-seg -> "n"), "" if none.
std::string guess_scale(const std::string& stem);

}  // namespace lucid::config
