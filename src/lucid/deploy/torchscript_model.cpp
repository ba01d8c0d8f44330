#include "lucid/deploy/torchscript_model.h"

#include <torch/library.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "lucid/util/class_names.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

bool is_torchscript(const std::string& path) {
  auto ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".torchscript";
}

namespace {

// torchvision::nms(dets, scores, iou_threshold): the indices of the boxes kept by greedy NMS, by
// descending score; a box is dropped when its IoU with a kept box exceeds the threshold. A TorchScript
// file exported with nms=True calls it; lucid provides it where torchvision's own is not loaded.
Tensor greedy_nms(const Tensor& dets, const Tensor& scores, double iou_threshold) {
  TORCH_CHECK(dets.dim() == 2 && dets.size(1) == 4 && scores.dim() == 1 && scores.size(0) == dets.size(0),
              "torchvision::nms takes boxes (N, 4) and scores (N)");
  const auto boxes = dets.to(torch::kCPU, torch::kFloat32).contiguous();
  const auto order = std::get<1>(scores.to(torch::kCPU, torch::kFloat32).sort(0, /*descending=*/true));
  const auto* b = boxes.data_ptr<float>();
  const auto* idx = order.data_ptr<int64_t>();
  const int64_t n = boxes.size(0);
  std::vector<char> dropped(static_cast<size_t>(n), 0);
  std::vector<int64_t> keep;
  for (int64_t a = 0; a < n; ++a) {
    const int64_t i = idx[a];
    if (dropped[static_cast<size_t>(i)]) continue;
    keep.push_back(i);
    const float* p = b + 4 * i;
    const float area_i = (p[2] - p[0]) * (p[3] - p[1]);
    for (int64_t c = a + 1; c < n; ++c) {
      const int64_t j = idx[c];
      if (dropped[static_cast<size_t>(j)]) continue;
      const float* q = b + 4 * j;
      const float w = std::max(0.0f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
      const float h = std::max(0.0f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
      const float inter = w * h;
      const float iou = inter / (area_i + (q[2] - q[0]) * (q[3] - q[1]) - inter);
      if (iou > iou_threshold) dropped[static_cast<size_t>(j)] = 1;
    }
  }
  return torch::tensor(keep, torch::kInt64).to(dets.device());
}

// Registers greedy_nms as torchvision::nms once, unless torchvision's operators are loaded (the
// Python package's process may hold them).
void provide_torchvision_nms() {
  static std::once_flag once;
  static std::unique_ptr<torch::Library> library;
  std::call_once(once, [] {
    if (c10::Dispatcher::singleton().findSchema({"torchvision::nms", ""})) return;
    library =
        std::make_unique<torch::Library>(torch::Library::FRAGMENT, "torchvision", std::nullopt, __FILE__, __LINE__);
    library->def("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor", &greedy_nms);
  });
}

// The reference writes booleans of args as JSON booleans, and nms may be null (None).
bool truthy(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

}  // namespace

TorchScriptModel::TorchScriptModel(const std::string& option, const std::string& path, const torch::Device& device)
    : what_(option + "=" + path), device_(device) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw UserError(what_ + ": no such file");
  torch::jit::ExtraFilesMap extra{{"config.txt", ""}};
  provide_torchvision_nms();
  try {
    module_ = torch::jit::load(path, device, extra);
  } catch (const std::exception&) {
    throw UserError(
        what_ +
        ": not a TorchScript archive this LibTorch loads (export it again with lucid export format=torchscript)");
  }
  module_.eval();
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(extra["config.txt"]);
    const auto& names = meta.at("names");
    if (!names.is_object() || names.empty()) throw std::invalid_argument("names");
    names_.resize(names.size());
    for (auto it = names.begin(); it != names.end(); ++it) {
      const auto i = std::stoul(it.key());
      if (i >= names_.size()) throw std::invalid_argument("names");
      names_[i] = it.value().get<std::string>();
    }
    const auto& imgsz = meta.at("imgsz");
    if (!imgsz.is_array() || imgsz.size() != 2 || imgsz[0] != imgsz[1]) throw std::invalid_argument("imgsz");
    imgsz_ = imgsz[0].get<int64_t>();
    batch_ = meta.at("batch").get<int64_t>();
    stride_ = meta.at("stride").get<int64_t>();
    if (meta.at("task").get<std::string>() != "segment") throw std::invalid_argument("task");
    const auto& args = meta.contains("args") ? meta["args"] : nlohmann::json::object();
    dynamic_ = truthy(args, "dynamic");
    rows_ = truthy(meta, "end2end") || truthy(args, "nms");
  } catch (const std::exception&) {
    throw UserError(what_ +
                    ": its config.txt is not a segmentation model's export metadata (names, imgsz, batch, "
                    "stride, task segment): export it with lucid export format=torchscript");
  }
  util::check_class_names(names_, what_ + ": config.txt names");
  if (imgsz_ < 32 || batch_ < 1 || stride_ < 1)
    throw UserError(what_ + ": its config.txt gives imgsz " + std::to_string(imgsz_) + ", batch " +
                    std::to_string(batch_) + ", stride " + std::to_string(stride_));
  for (const auto& p : module_.parameters()) {
    dtype_ = p.scalar_type();
    break;
  }
}

NetworkOutputs TorchScriptModel::run(const Tensor& images, int64_t, bool) {
  if (images.dim() != 4 || images.size(1) != 3)
    throw UserError(what_ + ": inputs are (batch, 3, H, W), not " + c10::str(images.sizes()));
  if (!dynamic_ && (images.size(2) != imgsz_ || images.size(3) != imgsz_))
    throw UserError(what_ + ": the file takes inputs (" + std::to_string(batch_) + ", 3, " + std::to_string(imgsz_) +
                    ", " + std::to_string(imgsz_) + ") (exported without dynamic=True), not " +
                    c10::str(images.sizes()));
  torch::NoGradGuard no_grad;
  const int64_t n = images.size(0);
  const int64_t step = dynamic_ ? n : batch_;
  std::vector<Tensor> preds, protos;
  for (int64_t i = 0; i < n; i += step) {
    const int64_t k = std::min(step, n - i);
    auto chunk = images.narrow(0, i, k).to(device_, dtype_);
    if (k < step)
      chunk = torch::cat({chunk, torch::zeros({step - k, 3, chunk.size(2), chunk.size(3)}, chunk.options())});
    c10::IValue out;
    try {
      out = module_.forward({chunk.contiguous()});
    } catch (const std::exception&) {
      throw UserError(what_ + ": the TorchScript module failed to run on input " + c10::str(chunk.sizes()));
    }
    if (!out.isTuple() || out.toTupleRef().elements().size() != 2)
      throw UserError(what_ + ": the module returned other than (output0, output1)");
    const auto& parts = out.toTupleRef().elements();
    preds.push_back(parts[0].toTensor().narrow(0, 0, k).to(torch::kFloat32));
    protos.push_back(parts[1].toTensor().narrow(0, 0, k).to(torch::kFloat32));
  }
  return {torch::cat(preds), torch::cat(protos)};
}

}  // namespace lucid::engine
