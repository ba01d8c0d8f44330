#include "lucid/deploy/compiled_model.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lucid/util/class_names.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

bool is_compiled_package(const std::string& path) {
  auto ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".pt2";
}

namespace {

using Metadata = std::unordered_map<std::string, std::string>;

const std::string& field(const Metadata& meta, const std::string& what, const std::string& key) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw UserError(what + ": the package has no " + key + " metadata (not written by lucid export format=aoti)");
  return it->second;
}

int64_t positive(const Metadata& meta, const std::string& what, const std::string& key, int64_t max) {
  const auto& v = field(meta, what, key);
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || n < 1 || n > max)
    throw UserError(what + ": package metadata " + key + "=" + v + " is not an integer in 1.." + std::to_string(max));
  return n;
}

}  // namespace

CompiledModel::CompiledModel(const std::string& option, const std::string& path, const torch::Device& device)
    : what_(option + "=" + path), device_(device) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw UserError(what_ + ": no such file");
  Metadata meta;
  try {
    meta = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(path, "model");
  } catch (const std::exception&) {
    throw UserError(what_ + ": not a compiled package (a .pt2 written by lucid export format=aoti)");
  }
  if (field(meta, what_, "lucid.format") != "1")
    throw UserError(what_ + ": package format " + meta["lucid.format"] + " is not one this lucid reads (1)");
  nc_ = positive(meta, what_, "lucid.nc", 1 << 16);
  nm_ = positive(meta, what_, "lucid.nm", 1 << 12);
  imgsz_ = positive(meta, what_, "lucid.imgsz", 1 << 15);
  batch_ = positive(meta, what_, "lucid.batch", 1 << 12);
  stride_ = positive(meta, what_, "lucid.stride", 1 << 10);
  max_det_ = positive(meta, what_, "lucid.max_det", 1 << 20);
  end2end_ = field(meta, what_, "lucid.end2end") == "1";
  const auto& dtype = field(meta, what_, "lucid.dtype");
  if (dtype != "float32" && dtype != "float16")
    throw UserError(what_ + ": package metadata lucid.dtype=" + dtype + " is not float32 or float16");
  dtype_ = dtype == "float16" ? torch::kHalf : torch::kFloat32;
  const auto& built_for = field(meta, what_, "lucid.device");
  if (built_for != (device.is_cuda() ? "cuda" : "cpu"))
    throw UserError(what_ + ": the package is compiled for " + built_for + ", not for device " + device.str() +
                    "; give device=" + (built_for == "cuda" ? "0" : "cpu") +
                    " or export again with device=" + device.str());
  try {
    auto names = nlohmann::json::parse(field(meta, what_, "lucid.names"));
    if (!names.is_array() || static_cast<int64_t>(names.size()) != nc_) throw std::invalid_argument("size");
    for (const auto& n : names) names_.push_back(n.get<std::string>());
    util::check_class_names(names_, what_ + ": package metadata lucid.names");
  } catch (const UserError&) {
    throw;
  } catch (const std::exception&) {
    throw UserError(what_ + ": package metadata lucid.names is not a JSON list of " + std::to_string(nc_) + " names");
  }
  try {
    loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
        path, "model", /*run_single_threaded=*/false, /*num_runners=*/1,
        device.is_cuda() ? device.index() : static_cast<c10::DeviceIndex>(-1));
  } catch (const std::exception&) {
    throw UserError(what_ +
                    ": the compiled package cannot be loaded (compiled by another torch version, or for "
                    "another CPU or GPU; export it again with this lucid)");
  }
}

CompiledModel::~CompiledModel() = default;

NetworkOutputs CompiledModel::run(const Tensor& images, int64_t, bool) {
  if (images.dim() != 4 || images.size(1) != 3 || images.size(2) != imgsz_ || images.size(3) != imgsz_)
    throw UserError(what_ + ": the package takes inputs (" + std::to_string(batch_) + ", 3, " + std::to_string(imgsz_) +
                    ", " + std::to_string(imgsz_) + "), not " + c10::str(images.sizes()));
  const int64_t n = images.size(0);
  std::vector<Tensor> preds, protos;
  for (int64_t i = 0; i < n; i += batch_) {
    const int64_t k = std::min(batch_, n - i);
    auto chunk = images.narrow(0, i, k).to(device_, dtype_);
    if (k < batch_) chunk = torch::cat({chunk, torch::zeros({batch_ - k, 3, imgsz_, imgsz_}, chunk.options())});
    std::vector<Tensor> out;
    try {
      out = loader_->run({chunk.contiguous()});
    } catch (const std::exception&) {
      throw UserError(what_ + ": the compiled package failed to run");
    }
    if (out.size() != 2 || out[0].dim() != 3 || out[1].dim() != 4 || out[0].size(0) != batch_ || out[1].size(1) != nm_)
      throw UserError(what_ + ": the package returned outputs other than (output0, output1) of its metadata");
    preds.push_back(out[0].narrow(0, 0, k).to(torch::kFloat32));
    protos.push_back(out[1].narrow(0, 0, k).to(torch::kFloat32));
  }
  return {torch::cat(preds), torch::cat(protos)};
}

}  // namespace lucid::engine
