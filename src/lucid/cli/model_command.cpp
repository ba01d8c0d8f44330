#include <iostream>
#include <limits>
#include <optional>

#include "lucid/cli/commands.h"
#include "lucid/cli/outcome.h"
#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/util/error.h"
#include "lucid/weights/model_source.h"

namespace lucid::cli {

namespace {

// The settings of `lucid model info|save`, each option declared once (config/fields.h): a member's
// initializer is its option's default.
struct ModelSettings {
  std::string model = "yolo26n-seg.yaml";
  std::string weights, out;
  int64_t nc = 0;  // 0: the weights' nc, else the model file's
  int64_t imgsz = 640;
  int64_t seed = 0;
};

// The options of `model info`, and of `model save` (with out=).
const config::FieldList<ModelSettings>& model_fields(bool save) {
  using S = ModelSettings;
  auto declare = [](bool with_out) {
    auto* f = new config::FieldList<S>(with_out ? "model save" : "model info");
    f->text("model",
            "model YAML (scale letter picks the scale, e.g. yolo26n-seg.yaml) or a weights file (.pt, .safetensors)")
        .to(&S::model);
    f->integer("nc", "", "number of classes (default: the weights' nc, else the model file's)")
        .range(1, config::kMaxClasses)
        .resolve([](const S&) { return 0LL; })
        .to(&S::nc);
    f->text("weights",
            "weights to load (.pt, .safetensors, a lucid checkpoint's EMA); its architecture unless model= is given")
        .to(&S::weights);
    f->integer("imgsz", "image size for the GFLOPs figure").range(32, config::kMaxImgsz).to(&S::imgsz);
    f->integer("seed", "random seed for the initial weights")
        .range(0, std::numeric_limits<int64_t>::max())
        .to(&S::seed);
    if (with_out) f->text("out", "output .safetensors file").to(&S::out);
    return f;
  };
  static const auto* info = declare(false);
  static const auto* saving = declare(true);
  return save ? *saving : *info;
}

struct Built {
  model::SegmentationModel model{nullptr};
  std::vector<std::string> names;  // the weights file's class names, if any
  int64_t imgsz = 0;               // the weights file's training size, if known
};

// The architecture of model= (or of weights= when model= is not given and the file has one), with
// the weights of weights= (or of model= when it is a weights file).
Built build(const ModelSettings& s, bool model_given) {
  torch::manual_seed(static_cast<uint64_t>(s.seed));
  int nc = s.nc > 0 ? static_cast<int>(s.nc) : -1;
  std::optional<engine::ModelSource> weights;
  if (!s.weights.empty()) {
    weights = engine::read_model_source("weights", s.weights);
    if (!weights->has_weights()) throw UserError("weights=" + s.weights + ": a model YAML holds no weights");
    if (nc < 0 && weights->spec) nc = weights->spec->nc;  // the classes the weights were trained for
  }
  const bool architecture_from_weights = weights && weights->spec && !model_given;
  auto source = architecture_from_weights ? std::move(*weights) : engine::read_model_source("model", s.model);
  if (architecture_from_weights) weights.reset();
  Built b;
  b.model = model::SegmentationModel(source.spec_for_classes(nc));
  const auto& from = weights ? *weights : source;
  if (!from.weights.empty()) model::load_state(*b.model, from.weights, from.file);
  b.names = from.names;
  b.imgsz = from.imgsz;
  return b;
}

}  // namespace

std::optional<ModelInfo> model_info_run(const std::vector<std::string>& args) {
  const auto& fields = model_fields(false);
  auto o = fields.options();
  if (!o.parse_or_help(args)) return std::nullopt;
  const auto s = fields.read(o);
  auto built = build(s, o.given("model"));
  const auto summary = built.model->summary(s.imgsz);
  return ModelInfo{summary.layers,
                   summary.parameters,
                   summary.gradients,
                   summary.gflops,
                   model::format_summary(*built.model, summary),
                   model::format_layer_table(*built.model)};
}

int model_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: lucid model info|save [key=value ...]\n"
      "  info  print the layer table and summary (layers, parameters, gradients, GFLOPs)\n"
      "  save  write the model's weights (initial or loaded) as safetensors, out=FILE\n";
  int exit_code = 0;
  const auto word = action_word(args, "model", usage, {"info", "save"}, exit_code);
  if (!word) return exit_code;
  const auto& action = *word;
  if (action == "info") {
    if (const auto info = model_info_run(std::vector<std::string>(args.begin() + 1, args.end())))
      std::cout << info->layer_table << info->summary << "\n";
    return 0;
  }
  const auto& fields = model_fields(true);
  auto o = fields.options();
  if (!o.parse_or_help(std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  const auto s = fields.read(o);
  auto built = build(s, o.given("model"));
  auto& m = built.model;
  if (s.out.empty()) throw UserError("model save: option out=FILE is required");
  engine::write_weights_file(s.out, *m, built.names, built.imgsz, /*half=*/false);
  std::cout << "saved " << s.out << "\n";
  return 0;
}

}  // namespace lucid::cli
