// A compiled package (`lucid export format=aoti`, a .pt2 file): the network compiled ahead of time by
// AOTInductor for one input shape (batch, 3, imgsz, imgsz) and one device, run through LibTorch's
// AOTIModelPackageLoader with no Python. It returns the head's export outputs (inference/network.h);
// end-to-end packages carry their top-k (max_det rows) fixed at export. The package metadata
// (lucid.* keys, written by scripts/deploy_export.py) gives the class names, nc, nm, imgsz, batch,
// stride, end2end, max_det, dtype and device. A package holds compiled code that is loaded into the
// process: load only packages you trust, as any shared library.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "lucid/inference/network.h"

namespace torch::inductor {
class AOTIModelPackageLoader;
}

namespace lucid::engine {

// Whether path names a compiled package (by its .pt2 extension).
bool is_compiled_package(const std::string& path);

class CompiledModel : public Network {
 public:
  // Loads the package for `device`, which must be the kind it was compiled for; errors name option=path.
  CompiledModel(const std::string& option, const std::string& path, const torch::Device& device);
  ~CompiledModel() override;

  // Any batch size: run as chunks of the package's batch, the last one padded with zero images.
  // max_det and agnostic are the package's own (fixed at export).
  NetworkOutputs run(const Tensor& images, int64_t max_det, bool agnostic) override;
  bool end2end() const override { return end2end_; }
  int64_t nc() const override { return nc_; }
  torch::Device device() const override { return device_; }
  int pad_multiple(int imgsz) const override { return static_cast<int>(imgsz_); }

  const std::vector<std::string>& names() const { return names_; }
  int64_t imgsz() const { return imgsz_; }
  int64_t batch() const { return batch_; }
  int64_t max_det() const { return max_det_; }

 private:
  std::string what_;  // option=path, for errors
  torch::Device device_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  std::vector<std::string> names_;
  int64_t nc_ = 0, nm_ = 0, imgsz_ = 0, batch_ = 0, stride_ = 0, max_det_ = 0;
  bool end2end_ = false;
  torch::ScalarType dtype_ = torch::kFloat32;
};

}  // namespace lucid::engine
