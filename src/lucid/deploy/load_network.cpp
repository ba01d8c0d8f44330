#include "lucid/deploy/load_network.h"

#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/torchscript_model.h"
#include "lucid/weights/model_source.h"

namespace lucid::engine {

LoadedNetwork load_network(const std::string& option, const std::string& path, const torch::Device& device, bool amp,
                           const std::optional<bool>& nms) {
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
