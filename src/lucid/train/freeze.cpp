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

// The number of layers freeze= counts (model.0, model.1, ...): one past the highest index named.
int64_t numbered_layers(model::SegmentationModelImpl& model) {
  int64_t n = 0;
  for (const auto& m : model.named_modules("", /*include_self=*/false)) {
    const auto& key = m.key();
    if (key.rfind("model.", 0) != 0) continue;
    const auto end = key.find('.', 6);
    const auto index = key.substr(6, end == std::string::npos ? std::string::npos : end - 6);
    if (!index.empty() && index.size() <= 4 && index.find_first_not_of("0123456789") == std::string::npos)
      n = std::max<int64_t>(n, std::stoll(index) + 1);
  }
  return n;
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

void freeze_layers(model::SegmentationModelImpl& model, const std::vector<int>& layers, const std::string& spec) {
  bool any_trains = false;
  for (auto& p : model.named_parameters()) {
    if (in_layers(p.key(), layers))
      p.value().set_requires_grad(false);
    else
      any_trains = any_trains || p.value().requires_grad();
  }
  // With nothing left to train the first backward pass fails with the library's own text.
  if (!any_trains)
    throw UserError("option freeze=" + spec + ": freezes every one of the model's " +
                    std::to_string(numbered_layers(model)) + " layers, so nothing would train; freeze fewer layers");
}

void train_mode(model::SegmentationModelImpl& model, const std::vector<int>& layers) {
  model.train();
  if (layers.empty()) return;
  for (const auto& m : model.named_modules("", /*include_self=*/false))
    if (m.value()->as<torch::nn::BatchNorm2d>() && in_layers(m.key() + ".", layers)) m.value()->eval();
}

}  // namespace lucid::engine
