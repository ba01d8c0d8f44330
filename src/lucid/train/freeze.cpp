#include "lucid/train/freeze.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "lucid/util/error.h"

namespace lucid::engine {

namespace {

// A layer count or index: at most four digits, so no conversion can overflow.
int parse_index(const std::string& item, const std::string& spec) {
  const bool digits = !item.empty() && item.size() <= 4 &&
                      std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!digits)
    throw UserError("option freeze=" + spec + ": '" + item +
                    "' is not a layer count or index (expected N or a comma-separated list like 0,1,2)");
  return std::stoi(item);
}

bool in_layers(const std::string& name, const std::vector<int>& layers) {
  for (int i : layers)
    if (name.rfind("model." + std::to_string(i) + ".", 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<int> parse_freeze(const std::string& spec) {
  std::vector<int> layers;
  if (spec.empty() || spec == "None") return layers;  // None: the reference's default
  if (spec.find(',') == std::string::npos) {
    const int n = parse_index(spec, spec);
    for (int i = 0; i < n; ++i) layers.push_back(i);
    return layers;
  }
  if (spec.back() == ',') throw UserError("option freeze=" + spec + ": ends with a comma");
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) layers.push_back(parse_index(item, spec));
  return layers;
}

void freeze_layers(model::SegmentationModelImpl& model, const std::vector<int>& layers) {
  for (auto& p : model.named_parameters())
    if (in_layers(p.key(), layers)) p.value().set_requires_grad(false);
}

void train_mode(model::SegmentationModelImpl& model, const std::vector<int>& layers) {
  model.train();
  if (layers.empty()) return;
  for (const auto& m : model.named_modules("", /*include_self=*/false))
    if (m.value()->as<torch::nn::BatchNorm2d>() && in_layers(m.key() + ".", layers)) m.value()->eval();
}

}  // namespace lucid::engine
