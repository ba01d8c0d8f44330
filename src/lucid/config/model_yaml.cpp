#include "lucid/config/model_yaml.h"

#include <filesystem>
#include <regex>

#include "lucid/config/options.h"
#include "lucid/util/error.h"

namespace lucid::config {

namespace fs = std::filesystem;

std::string guess_scale(const std::string& stem) {
  static const std::regex re(R"(yolo(e-)?v?\d+([nslmx]))");
  std::smatch m;
  if (std::regex_search(stem, m, re)) return m[2].str();
  return "";
}

namespace {

fs::path resolve(const std::string& name_or_path) {
  fs::path given(name_or_path);
  // The unified name drops the scale letter: yolo26n-seg.yaml -> yolo26-seg.yaml.
  static const std::regex drop_scale(R"((\d+)([nslmx])(.+)?$)");
  std::string unified = std::regex_replace(given.stem().string(), drop_scale, "$1$3") + given.extension().string();
  std::vector<fs::path> candidates{given, given.parent_path() / unified, fs::path(LUCID_MODELS_DIR) / given.filename(),
                                   fs::path(LUCID_MODELS_DIR) / unified};
  for (const auto& c : candidates)
    if (!c.empty() && fs::is_regular_file(c)) return c;
  throw UserError("model=" + name_or_path + ": no such model YAML (looked in the working directory and " +
                  std::string(LUCID_MODELS_DIR) + ")");
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

}  // namespace

ModelSpec load_model_spec(const std::string& name_or_path, int nc_override) {
  auto file = resolve(name_or_path);
  ModelSpec spec;
  spec.path = file.string();
  spec.name = fs::path(name_or_path).stem().string();
  YAML::Node root;
  try {
    root = YAML::LoadFile(spec.path);
  } catch (const YAML::Exception& e) {
    throw error_at(spec.path, e.mark.line + 1, std::string("invalid YAML: ") + e.msg);
  }
  try {
    if (root["nc"]) spec.nc = root["nc"].as<int>();
    if (root["reg_max"]) spec.reg_max = root["reg_max"].as<int>();
    if (root["end2end"]) spec.end2end = root["end2end"].as<bool>();
    if (root["depth_multiple"]) spec.depth = root["depth_multiple"].as<double>();
    if (root["width_multiple"]) spec.width = root["width_multiple"].as<double>();
    if (auto scales = root["scales"]) {
      spec.scale = guess_scale(spec.name);
      if (spec.scale.empty()) spec.scale = scales.begin()->first.as<std::string>();
      auto s = scales[spec.scale];
      if (!s || !s.IsSequence() || s.size() != 3)
        throw error_at(spec.path, 0, "scale '" + spec.scale + "' is not defined as [depth, width, max_channels]");
      spec.depth = s[0].as<double>();
      spec.width = s[1].as<double>();
      spec.max_channels = s[2].as<int>();
    }
    for (const char* part : {"backbone", "head"}) {
      auto rows = root[part];
      if (!rows || !rows.IsSequence()) throw error_at(spec.path, 0, std::string("missing '") + part + "' list");
      for (const auto& row : rows) {
        int line = row.Mark().line + 1;
        if (!row.IsSequence() || row.size() != 4)
          throw error_at(spec.path, line, "a layer is [from, repeats, module, args]");
        LayerRow r;
        r.line = line;
        r.from = read_from(row[0], spec.path, line);
        r.repeats = row[1].as<int>();
        if (r.repeats < 1 || r.repeats > 1000) throw error_at(spec.path, line, "repeats must be from 1 to 1000");
        r.module = row[2].as<std::string>();
        r.args = row[3];
        if (!r.args.IsSequence()) throw error_at(spec.path, line, "layer args must be a list");
        spec.layers.push_back(std::move(r));
      }
    }
  } catch (const YAML::Exception& e) {
    throw error_at(spec.path, e.mark.line + 1, std::string("unexpected value: ") + e.msg);
  }
  if (nc_override >= 0) spec.nc = nc_override;
  if (spec.nc <= 0 || spec.nc > kMaxClasses)
    throw error_at(spec.path, 0, "nc must be from 1 to " + std::to_string(kMaxClasses));
  return spec;
}

}  // namespace lucid::config
