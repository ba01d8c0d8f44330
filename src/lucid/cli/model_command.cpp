#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/model/ultralytics_pt.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

config::Options model_options(const std::string& action) {
  std::vector<config::OptionSpec> specs{
      {"model", "yolo26n-seg.yaml", "model YAML (scale letter picks the scale, e.g. yolo26n-seg.yaml)"},
      {"nc", "", "number of classes (default: the .pt weights' nc, else the YAML's)"},
      {"weights", "", "weights to load: .safetensors (names as the reference's state dict) or an Ultralytics .pt"},
      {"imgsz", "640", "image size for the GFLOPs figure"},
      {"seed", "0", "random seed for the initial weights"},
  };
  if (action == "save") specs.push_back({"out", "", "output .safetensors file"});
  return config::Options("model " + action, specs);
}

model::SegmentationModel build(const config::Options& o) {
  torch::manual_seed(static_cast<uint64_t>(o.integer("seed")));
  int nc = o.str("nc").empty() ? -1 : static_cast<int>(o.integer("nc", 1, config::kMaxClasses));
  const std::string& weights = o.str("weights");
  std::map<std::string, torch::Tensor> state;
  if (!weights.empty() && model::is_torch_zip(weights)) {
    auto pt = model::read_ultralytics_pt(weights);
    if (nc < 0 && !pt.yaml.empty()) {  // the classes the weights were trained for
      const auto yaml = nlohmann::json::parse(pt.yaml);
      if (yaml.contains("nc") && yaml["nc"].is_number_integer()) nc = yaml["nc"].get<int>();
    }
    state = std::move(pt.state);
  } else if (!weights.empty()) {
    state = model::read_safetensors(weights);
  }
  auto spec = config::load_model_spec(o.str("model"), nc);
  model::SegmentationModel m(spec);
  if (!weights.empty()) model::load_state(*m, state, weights);
  return m;
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
  auto m = build(o);
  if (action == "info") {
    std::cout << model::format_layer_table(*m);
    std::cout << model::format_summary(*m, m->summary(o.integer("imgsz", 32, config::kMaxImgsz))) << "\n";
    return 0;
  }
  if (o.str("out").empty()) throw UserError("model save: option out=FILE is required");
  model::write_safetensors(o.str("out"), model::state_dict(*m),
                           {{"model", m->spec().name}, {"nc", std::to_string(m->nc())}});
  std::cout << "saved " << o.str("out") << "\n";
  return 0;
}

}  // namespace lucid::cli
