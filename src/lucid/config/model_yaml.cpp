#include "lucid/config/model_yaml.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "lucid/config/options.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/util/error.h"
#include "lucid/util/input_files.h"

namespace lucid::config {

namespace fs = std::filesystem;

constexpr uint64_t kMaxModelYamlBytes = 1 << 20;  // the reference's largest is under 4 KiB

std::string guess_scale(const std::string& stem) {
  static const std::regex re(R"(yolo(e-)?v?\d+([nslmx]))");
  std::smatch m;
  if (std::regex_search(stem, m, re)) return m[2].str();
  return "";
}

namespace {

// The folder of the bundled model YAMLs: LUCID_MODELS_DIR from the environment (the Python package
// sets it to the YAMLs it ships), else the source tree's models/ the build was configured in.
std::string models_dir() {
  const char* env = std::getenv("LUCID_MODELS_DIR");
  return env && *env ? std::string(env) : std::string(LUCID_MODELS_DIR);
}

fs::path resolve(const std::string& name_or_path) {
  fs::path given(name_or_path);
  const fs::path bundled = models_dir();
  // The unified name drops the scale letter: yolo26n-seg.yaml -> yolo26-seg.yaml.
  static const std::regex drop_scale(R"((\d+)([nslmx])(.+)?$)");
  std::string unified = std::regex_replace(given.stem().string(), drop_scale, "$1$3") + given.extension().string();
  std::vector<fs::path> candidates{given, given.parent_path() / unified, bundled / given.filename(), bundled / unified};
  std::error_code ec;
  if (fs::exists(given, ec) && !fs::is_regular_file(given, ec))  // a device, a fifo, a folder: said so
    util::require_regular_file(name_or_path, "model=" + name_or_path);
  for (const auto& c : candidates)
    if (!c.empty() && fs::is_regular_file(c)) return c;
  throw UserError("model=" + name_or_path + ": no such model YAML (looked in the working directory and " +
                  bundled.string() + ")");
}

std::vector<int> read_from(const YAML::Node& n, const std::string& path, int line) {
  if (n.IsScalar()) return {n.as<int>()};
  if (n.IsSequence() && n.size() > 0) {
    std::vector<int> out;
    for (const auto& x : n) out.push_back(x.as<int>());
    return out;
  }
  throw error_at(path, line, "'from' must be an integer or a list of integers");
}

// A plain YAML scalar as the YAML core schema (and the reference's loader) types it; quoted ones
// stay strings.
nlohmann::ordered_json scalar_to_json(const YAML::Node& n) {
  const auto& v = n.Scalar();
  if (n.Tag() == "!") return v;
  static const std::regex int_re(R"([-+]?[0-9]+)"), float_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  try {
    if (std::regex_match(v, int_re)) return std::stoll(v);
    if (std::regex_match(v, float_re)) return std::stod(v);
  } catch (const std::out_of_range&) {
  }
  return v;
}

nlohmann::ordered_json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      auto out = nlohmann::ordered_json::array();
      for (const auto& x : n) out.push_back(to_json(x));
      return out;
    }
    case YAML::NodeType::Map: {
      auto out = nlohmann::ordered_json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    default:
      return nullptr;
  }
}

// The spec from a parsed model dict. name: the model's stem (picks the scale when the dict has no
// `scale` key); yaml_file: the name recorded in the dict's JSON form.
ModelSpec spec_from_root(const YAML::Node& root, const std::string& path, const std::string& name,
                         const std::string& yaml_file, int nc_override) {
  ModelSpec spec;
  spec.path = path;
  spec.name = name;
  if (!root.IsMap()) throw error_at(path, 0, "a model YAML is a map with backbone and head lists");
  try {
    if (root["nc"]) spec.nc = root["nc"].as<int>();
    if (root["reg_max"]) spec.reg_max = root["reg_max"].as<int>();
    if (root["end2end"]) spec.end2end = root["end2end"].as<bool>();
    if (root["depth_multiple"]) spec.depth = root["depth_multiple"].as<double>();
    if (root["width_multiple"]) spec.width = root["width_multiple"].as<double>();
    if (auto scales = root["scales"]) {
      if (!scales.IsMap() || scales.size() == 0) throw error_at(path, scales.Mark().line + 1, "'scales' must be a map");
      if (root["scale"] && root["scale"].IsScalar() && !root["scale"].Scalar().empty())
        spec.scale = root["scale"].as<std::string>();
      if (spec.scale.empty()) spec.scale = guess_scale(spec.name);
      if (spec.scale.empty()) spec.scale = scales.begin()->first.as<std::string>();
      auto s = scales[spec.scale];
      if (!s || !s.IsSequence() || s.size() != 3)
        throw error_at(path, 0, "scale '" + spec.scale + "' is not defined as [depth, width, max_channels]");
      spec.depth = s[0].as<double>();
      spec.width = s[1].as<double>();
      spec.max_channels = s[2].as<int>();
    }
    for (const char* part : {"backbone", "head"}) {
      auto rows = root[part];
      if (!rows || !rows.IsSequence()) throw error_at(path, 0, std::string("missing '") + part + "' list");
      for (const auto& row : rows) {
        int line = row.Mark().line + 1;
        if (!row.IsSequence() || row.size() != 4)
          throw error_at(path, line, "a layer is [from, repeats, module, args]");
        LayerRow r;
        r.line = line;
        r.from = read_from(row[0], path, line);
        r.repeats = row[1].as<int>();
        if (r.repeats < 1 || r.repeats > 1000) throw error_at(spec.path, line, "repeats must be from 1 to 1000");
        r.module = row[2].as<std::string>();
        r.args = row[3];
        if (!r.args.IsSequence()) throw error_at(path, line, "layer args must be a list");
        spec.layers.push_back(std::move(r));
      }
    }
  } catch (const YAML::Exception& e) {
    throw error_at(path, e.mark.line + 1, std::string("unexpected value: ") + e.msg);
  }
  // Bounds before any arithmetic on them (the builder bounds channels and parameters).
  const auto multiple_ok = [](double v) { return std::isfinite(v) && v > 0 && v <= 16; };
  if (!multiple_ok(spec.depth) || !multiple_ok(spec.width))
    throw error_at(path, 0,
                   "depth and width multiples must be above 0 and at most 16 (depth " + std::to_string(spec.depth) +
                       ", width " + std::to_string(spec.width) + ")");
  if (spec.max_channels < 1) throw error_at(path, 0, "max_channels must be positive");
  if (spec.reg_max < 1 || spec.reg_max > 256) throw error_at(path, 0, "reg_max must be from 1 to 256");
  if (nc_override >= 0) spec.nc = nc_override;
  if (spec.nc <= 0 || spec.nc > kMaxClasses)
    throw error_at(spec.path, 0, "nc must be from 1 to " + std::to_string(kMaxClasses));
  auto j = to_json(root);
  j["nc"] = spec.nc;
  if (!spec.scale.empty()) j["scale"] = spec.scale;
  j["yaml_file"] = yaml_file;
  spec.yaml = j.dump();
  return spec;
}

YAML::Node parse_yaml(const std::string& text, const std::string& path) {
  try {
    return load_bounded_yaml(text, path);
  } catch (const YAML::Exception& e) {
    throw error_at(path, e.mark.line + 1, std::string("invalid YAML: ") + e.msg);
  }
}

}  // namespace

ModelSpec load_model_spec(const std::string& name_or_path, int nc_override) {
  auto file = resolve(name_or_path);
  const std::string text = util::read_input_file(file.string(), file.string(), kMaxModelYamlBytes);
  const auto given = fs::path(name_or_path);
  return spec_from_root(parse_yaml(text, file.string()), file.string(), given.stem().string(),
                        given.filename().string(), nc_override);
}

ModelSpec model_spec_from_text(const std::string& text, const std::string& source, int nc_override) {
  auto root = parse_yaml(text, source);
  std::string yaml_file;
  if (root.IsMap() && root["yaml_file"] && root["yaml_file"].IsScalar()) yaml_file = root["yaml_file"].Scalar();
  const auto name = yaml_file.empty() ? fs::path(source).stem().string() : fs::path(yaml_file).stem().string();
  return spec_from_root(root, source, name,
                        yaml_file.empty() ? name + ".yaml" : fs::path(yaml_file).filename().string(), nc_override);
}

}  // namespace lucid::config
