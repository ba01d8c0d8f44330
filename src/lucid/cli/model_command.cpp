#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/engine/model_source.h"
#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

config::Options model_options(const std::string& action) {
  std::vector<config::OptionSpec> specs{
      {"model", "yolo26n-seg.yaml",
       "model YAML (scale letter picks the scale, e.g. yolo26n-seg.yaml) or a weights file (.pt, .safetensors)"},
      {"nc", "", "number of classes (default: the weights' nc, else the model file's)"},
      {"weights", "",
       "weights to load (.pt, .safetensors, a lucid checkpoint's EMA); its architecture unless model= is given"},
      {"imgsz", "640", "image size for the GFLOPs figure"},
      {"seed", "0", "random seed for the initial weights"},
  };
  if (action == "save") specs.push_back({"out", "", "output .safetensors file"});
  return config::Options("model " + action, specs);
}

struct Built {
  model::SegmentationModel model{nullptr};
  std::vector<std::string> names;  // the weights file's class names, if any
  int64_t imgsz = 0;               // the weights file's training size, if known
};

// The architecture of model= (or of weights= when model= is not given and the file has one), with
// the weights of weights= (or of model= when it is a weights file).
Built build(const config::Options& o) {
  torch::manual_seed(static_cast<uint64_t>(o.integer("seed")));
  int nc = o.str("nc").empty() ? -1 : static_cast<int>(o.integer("nc", 1, config::kMaxClasses));
  std::optional<engine::ModelSource> weights;
  if (!o.str("weights").empty()) {
    weights = engine::read_model_source("weights", o.str("weights"));
    if (!weights->has_weights()) throw UserError("weights=" + o.str("weights") + ": a model YAML holds no weights");
    if (nc < 0 && weights->spec) nc = weights->spec->nc;  // the classes the weights were trained for
  }
  const bool architecture_from_weights = weights && weights->spec && !o.given("model");
  auto source = architecture_from_weights ? std::move(*weights) : engine::read_model_source("model", o.str("model"));
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

int model_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: lucid model info|save [key=value ...]\n"
      "  info  print the layer table and summary (layers, parameters, gradients, GFLOPs)\n"
      "  save  write the model's weights (initial or loaded) as safetensors, out=FILE\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage;
    return args.empty() ? 2 : 0;
  }
  const auto& action = args[0];
  if (action != "info" && action != "save") throw UserError("unknown model action '" + action + "'\n" + usage);
  auto o = model_options(action);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
    std::cout << o.help();
    return 0;
  }
  o.parse(rest);
  auto built = build(o);
  auto& m = built.model;
  if (action == "info") {
    std::cout << model::format_layer_table(*m);
    std::cout << model::format_summary(*m, m->summary(o.integer("imgsz", 32, config::kMaxImgsz))) << "\n";
    return 0;
  }
  if (o.str("out").empty()) throw UserError("model save: option out=FILE is required");
  engine::write_weights_file(o.str("out"), *m, built.names, built.imgsz, /*half=*/false);
  std::cout << "saved " << o.str("out") << "\n";
  return 0;
}

}  // namespace lucid::cli
