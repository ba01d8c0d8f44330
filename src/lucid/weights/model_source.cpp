#include "lucid/weights/model_source.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "lucid/config/options.h"
#include "lucid/config/user_settings.h"
#include "lucid/model/safetensors.h"
#include "lucid/model/ultralytics_pt.h"
#include "lucid/util/class_names.h"
#include "lucid/util/error.h"
#include "lucid/weights/checkpoint.h"
#include "lucid/weights/run_record.h"

namespace lucid::engine {

namespace fs = std::filesystem;

std::string kind_name(ModelFileKind kind) {
  switch (kind) {
    case ModelFileKind::Yaml:
      return "model YAML";
    case ModelFileKind::UltralyticsPt:
      return "Ultralytics checkpoint";
    case ModelFileKind::Weights:
      return "lucid weights file";
    case ModelFileKind::TrainingCheckpoint:
      return "lucid training checkpoint";
  }
  return "";
}

const config::ModelSpec& ModelSource::require_spec() const {
  if (!spec)
    throw UserError(option + "=" + file +
                    ": plain weights without the model's architecture (no 'yaml' metadata); give the model YAML as "
                    "model= and these weights as pretrained= (train) or weights= (model info)");
  return *spec;
}

config::ModelSpec ModelSource::spec_for_classes(int nc) const {
  // A YAML file is read again so that errors keep its line numbers; the text stored in weights
  // files (JSON) has none to keep.
  if (kind == ModelFileKind::Yaml) return config::load_model_spec(file, nc);
  const auto& s = require_spec();
  return config::model_spec_from_text(s.yaml, s.path, nc);
}

namespace {

std::string lower_extension(const std::string& path) {
  auto ext = fs::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// The safetensors layout: an 8-byte little-endian header length that fits the file, then '{'.
bool looks_like_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return false;
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | head[i];
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return !ec && size >= 9 && len >= 2 && len <= size - 8 && head[8] == '{';
}

std::string prefix(const std::string& option, const std::string& file) { return option + "=" + file + ": "; }

// The reference's released segmentation weights by name (its GITHUB_ASSETS_NAMES of that form), from
// its release v8.4.0. This executable links no HTTP client: the Python package's `lucid` downloads
// them into weights_dir (python/lucid_yolo/assets.py), where they are found here afterwards.
constexpr const char* kReleasedWeightsUrl = "https://github.com/ultralytics/assets/releases/download/v8.4.0/";
bool is_released_weights_name(const std::string& path) {
  static const std::regex name(R"((yolo26|yolo11|yolov8)[nsmlx]-seg\.pt)");
  return std::regex_match(path, name);
}

// A released name absent here is the copy in the settings' weights_dir, where there is one.
std::string released_weights_path(const std::string& path) {
  std::error_code ec;
  if (!is_released_weights_name(path) || fs::exists(path, ec)) return path;
  const auto in_weights = config::weights_dir() / path;
  return fs::is_regular_file(in_weights, ec) ? in_weights.string() : path;
}

// A metadata value that must be a non-negative integer.
int64_t metadata_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) return 0;
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= 0 && v <= 1'000'000) return v;
  } catch (const std::exception&) {
  }
  throw UserError(path + ": metadata '" + key + "' = '" + it->second + "' is not an integer in [0, 1000000]");
}

// An imgsz a weights file states, before predict or val letterboxes to it: 0 (not stated) or
// imgsz='s range.
// imgsz='s range, rounded up to the stride as the option is (with a warning naming the file), so an
// imgsz of 100 letterboxes to 128 rather than to a size the network's strides cannot divide.
int64_t checked_imgsz(int64_t v, const std::string& file, const std::string& where) {
  if (v == 0) return v;
  if (v >= 1 && v <= config::kMaxImgsz) return config::stride_multiple(v, file + ": its " + where + " imgsz");
  throw UserError(file + ": its imgsz " + std::to_string(v) + " (" + where + ") is not from 1 to " +
                  std::to_string(config::kMaxImgsz) + "; the file is damaged, or give imgsz=");
}

// train_args.imgsz of a checkpoint: an integer, or a text of digits (the reference's check_imgsz
// reads '640' as 640 and raises a TypeError for a float); null or missing is not stated. Anything
// else is refused naming the file and the field, not ignored.
int64_t train_args_imgsz(const nlohmann::json& args, const std::string& file) {
  if (!args.contains("imgsz") || args["imgsz"].is_null()) return 0;
  const auto& v = args["imgsz"];
  if (v.is_number_integer()) return checked_imgsz(v.get<int64_t>(), file, "train_args");
  if (v.is_string()) {
    const auto& t = v.get_ref<const std::string&>();
    if (!t.empty() && t.size() <= 6 && t.find_first_not_of("0123456789") == std::string::npos)
      return checked_imgsz(std::stoll(t), file, "train_args");
  }
  std::string shown = v.dump();  // JSON writes a NaN as null
  if (v.is_number_float()) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v.get<double>());
    shown = b;
  }
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  throw UserError(file + ": its train_args.imgsz " + shown + " (" + v.type_name() +
                  ") is not an integer imgsz; the file is damaged, or give imgsz=");
}

std::vector<std::string> metadata_names(const std::map<std::string, std::string>& meta, const std::string& path) {
  auto it = meta.find("names");
  if (it == meta.end()) return {};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    throw UserError(path + ": metadata 'names' is not valid JSON");
  }
  std::vector<std::string> out;
  if (!j.is_array()) throw UserError(path + ": metadata 'names' is not a list of class names");
  for (const auto& n : j) {
    if (!n.is_string()) throw UserError(path + ": metadata 'names' holds a value that is not a string");
    out.push_back(n.get<std::string>());
    util::check_class_name(out.back(), path + ": metadata 'names' entry " + std::to_string(out.size() - 1));
  }
  return out;
}

std::map<std::string, torch::Tensor> section(std::map<std::string, torch::Tensor>& all, const std::string& prefix) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [k, v] : all)
    if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), std::move(v));
  return out;
}

void read_pt(ModelSource& s, bool weights) {
  auto w = model::read_ultralytics_pt(s.file);
  if (w.yaml.empty()) throw UserError(s.file + ": the checkpoint's model has no 'yaml' (its architecture)");
  s.spec = config::model_spec_from_text(w.yaml, s.file + " (model yaml)");
  s.names = std::move(w.names);
  if (weights) s.weights = std::move(w.state);
  const auto& a = w.train_args;
  if (a.is_object()) {
    s.imgsz = train_args_imgsz(a, s.file);
    if (a.contains("data") && a["data"].is_string()) s.data = a["data"].get<std::string>();
    if (a.contains("overlap_mask") && a["overlap_mask"].is_boolean()) s.overlap_mask = a["overlap_mask"].get<bool>();
  }
}

void read_training_checkpoint(ModelSource& s, const model::SafetensorsHeader& header, bool weights) {
  auto state = read_checkpoint_state(s.file);
  for (const auto& n : state.names) s.names.push_back(n.get<std::string>());
  s.train_args = state.args;
  // The run's values, resolved as `lucid train` resolved them (records of older runs hold "" for
  // defaults).
  const auto run = read_run_record(state.args, s.file);
  s.imgsz = run.imgsz;
  s.data = run.data;
  s.overlap_mask = run.overlap_mask;
  const int nc = static_cast<int>(s.names.size());
  auto yaml = header.metadata.find("yaml");
  if (yaml != header.metadata.end())
    s.spec = config::model_spec_from_text(yaml->second, s.file + " (metadata yaml)", nc);
  else  // checkpoints written before the model dict was stored: the run's model option
    s.spec = config::load_model_spec(run.model, nc);
  if (weights) {
    auto all = model::read_safetensors(s.file);
    s.weights = section(all, "ema/");
    if (s.weights.empty()) throw UserError(s.file + ": no EMA weights (ema/...) in the checkpoint");
  }
}

void read_weights(ModelSource& s, const model::SafetensorsHeader& header, bool weights) {
  const auto& meta = header.metadata;
  s.names = metadata_names(meta, s.file);
  s.imgsz = checked_imgsz(metadata_int(meta, "imgsz", s.file), s.file, "metadata");
  if (auto d = meta.find("data"); d != meta.end()) s.data = d->second;
  const int nc = meta.count("nc") ? static_cast<int>(metadata_int(meta, "nc", s.file)) : -1;
  if (auto y = meta.find("yaml"); y != meta.end())
    s.spec = config::model_spec_from_text(y->second, s.file + " (metadata yaml)", nc);
  else if (auto m = meta.find("model"); m != meta.end())  // `lucid model save` before the dict was stored
    s.spec = config::load_model_spec(m->second, nc);
  if (weights) s.weights = model::read_safetensors(s.file);
}

}  // namespace

ModelFileKind detect_model_file(const std::string& option, const std::string& path) {
  if (path.empty()) throw UserError("option " + option + "= is empty");
  const auto ext = lower_extension(path);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (ext == ".yaml" || ext == ".yml") return ModelFileKind::Yaml;  // looked up in models/ too
    if (is_released_weights_name(path))
      throw UserError(prefix(option, path) + "no such file here or in weights_dir (" + config::weights_dir().string() +
                      ", lucid settings); this lucid executable downloads nothing: `lucid` of the Python package "
                      "(pip install lucid_yolo) downloads it there, or save " +
                      kReleasedWeightsUrl + path + " there");
    throw UserError(prefix(option, path) + "no such file");
  }
  if (!fs::is_regular_file(path, ec)) throw UserError(prefix(option, path) + "not a file");
  if (ext == ".pt2")
    throw UserError(prefix(option, path) +
                    "a compiled package (lucid export format=aoti) runs only in lucid predict and lucid bench predict; "
                    "give the weights it was exported from");
  if (model::is_torch_zip(path)) return ModelFileKind::UltralyticsPt;
  auto safetensors_kind = [&] {
    const auto header = model::read_safetensors_header(path);
    return header.metadata.count("lucid") ? ModelFileKind::TrainingCheckpoint : ModelFileKind::Weights;
  };
  if (looks_like_safetensors(path) || ext == ".safetensors")
    return safetensors_kind();  // the reader says what is wrong
  if (ext == ".pt" || ext == ".pth") {
    model::read_ultralytics_pt(path);  // says what is wrong with it
    return ModelFileKind::UltralyticsPt;
  }
  if (ext == ".yaml" || ext == ".yml") return ModelFileKind::Yaml;
  throw UserError(prefix(option, path) + "not a model YAML, .pt, or .safetensors file");
}

ModelSource read_model_source(const std::string& option, const std::string& given, bool weights) {
  const auto path = released_weights_path(given);
  ModelSource s;
  s.option = option;
  s.file = path;
  s.kind = detect_model_file(option, path);
  switch (s.kind) {
    case ModelFileKind::Yaml:
      s.spec = config::load_model_spec(path);
      break;
    case ModelFileKind::UltralyticsPt:
      read_pt(s, weights);
      break;
    case ModelFileKind::TrainingCheckpoint:
      read_training_checkpoint(s, model::read_safetensors_header(path), weights);
      break;
    case ModelFileKind::Weights:
      read_weights(s, model::read_safetensors_header(path), weights);
      break;
  }
  if (s.spec && !s.names.empty() && static_cast<int>(s.names.size()) != s.spec->nc)
    throw UserError(path + ": " + std::to_string(s.names.size()) +
                    " class names but the model has nc=" + std::to_string(s.spec->nc));
  return s;
}

InferenceModel load_inference_model(const std::string& option, const std::string& path, const torch::Device& device) {
  InferenceModel out;
  out.source = read_model_source(option, path);
  auto& s = out.source;
  if (!s.has_weights())
    throw UserError(prefix(option, path) +
                    "a model YAML holds no trained weights; give a weights file (.pt, "
                    ".safetensors)");
  out.model = model::SegmentationModel(s.require_spec());
  model::load_state(*out.model, s.weights, path);
  s.weights.clear();
  out.model->to(device);
  if (device.is_cuda()) model::use_channels_last(*out.model);
  out.model->eval();
  return out;
}

void write_weights_file(const std::string& path, const model::SegmentationModelImpl& model,
                        const std::vector<std::string>& names, int64_t imgsz, bool half) {
  model::NamedTensors t;
  for (auto& [k, v] : model::state_dict(model)) {
    auto c = v.detach().to(torch::kCPU);
    t.emplace_back(k, half && c.is_floating_point() ? c.to(torch::kHalf) : c);
  }
  std::map<std::string, std::string> meta{{"yaml", model.spec().yaml}, {"nc", std::to_string(model.nc())}};
  if (!names.empty()) meta["names"] = nlohmann::json(names).dump();
  if (imgsz > 0) meta["imgsz"] = std::to_string(imgsz);
  model::write_safetensors(path, t, meta);
}

}  // namespace lucid::engine
