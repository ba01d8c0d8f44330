#include "lucid/deploy/load_network.h"

#include <map>
#include <mutex>

#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/torchscript_model.h"
#include "lucid/util/error.h"
#include "lucid/weights/model_source.h"

namespace lucid::engine {

namespace {

struct Loaders {
  std::mutex mutex;
  std::map<std::string, NetworkLoader> by_suffix;
};

Loaders& loaders() {
  static Loaders l;
  return l;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The registered loader for path's suffix, if any.
NetworkLoader loader_for(const std::string& path) {
  auto& l = loaders();
  const std::lock_guard<std::mutex> lock(l.mutex);
  for (const auto& [suffix, loader] : l.by_suffix)
    if (ends_with(path, suffix)) return loader;
  return {};
}

}  // namespace

void register_network_loader(const std::string& suffix, NetworkLoader loader) {
  auto& l = loaders();
  const std::lock_guard<std::mutex> lock(l.mutex);
  l.by_suffix[suffix] = std::move(loader);
}

bool is_exported_network(const std::string& path) {
  return is_compiled_package(path) || is_torchscript(path) || loader_for(path) || ends_with(path, ".onnx");
}

LoadedNetwork load_network(const std::string& option, const std::string& path, const torch::Device& device, bool amp,
                           const std::optional<bool>& nms) {
  if (auto loader = loader_for(path)) return loader(option, path, device);
  if (ends_with(path, ".onnx"))
    throw UserError(
        option + "=" + path + ": an ONNX file runs in onnxruntime, through the Python package: YOLO(\"" + path +
        "\").predict(...) (pip install onnxruntime); lucid predict runs weights, .torchscript and .pt2 files");
  LoadedNetwork out;
  if (is_compiled_package(path)) {
    auto compiled = std::make_unique<CompiledModel>(option, path, device);
    out.names = compiled->names();
    out.imgsz = compiled->imgsz();
    out.fixed_imgsz = true;
    out.network = std::move(compiled);
    return out;
  }
  if (is_torchscript(path)) {
    auto script = std::make_unique<TorchScriptModel>(option, path, device);
    out.names = script->names();
    out.imgsz = script->imgsz();
    out.fixed_imgsz = !script->dynamic();
    out.network = std::move(script);
    return out;
  }
  auto loaded = load_inference_model(option, path, device);
  out.model = loaded.model;
  out.names = loaded.source.names;
  for (int64_t c = static_cast<int64_t>(out.names.size()); c < out.model->nc(); ++c)
    out.names.push_back("class" + std::to_string(c));
  out.imgsz = loaded.source.imgsz;
  out.network = std::make_unique<EagerNetwork>(*out.model, device, amp, nms);
  return out;
}

}  // namespace lucid::engine
