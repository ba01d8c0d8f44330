// A TorchScript file (`lucid export format=torchscript`, a .torchscript archive written by the
// reference's exporter: torch.jit.trace of the model in export mode), run by LibTorch's
// torch::jit with no Python. Its extra file config.txt holds the reference's metadata as JSON
// (names, imgsz, batch, stride, end2end, args: dynamic and nms), which gives the class names, the
// input it takes and the layout of its outputs (inference/network.h): the one-to-one head's rows for
// an end-to-end export, rows after NMS for nms=True, else the one-to-many head's dense output.
#pragma once
#include <torch/script.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "lucid/inference/network.h"

namespace lucid::engine {

// Whether path names a TorchScript file (by its .torchscript extension).
bool is_torchscript(const std::string& path);

class TorchScriptModel : public Network {
 public:
  // Loads the file onto `device`; errors name option=path.
  TorchScriptModel(const std::string& option, const std::string& path, const torch::Device& device);

  // A fixed-shape file runs any batch as chunks of its batch (the last padded with zero images).
  // Rows are the file's own: max_det and agnostic were fixed at export.
  NetworkOutputs run(const Tensor& images, int64_t max_det, bool agnostic) override;
  bool end2end() const override { return rows_; }
  int64_t nc() const override { return static_cast<int64_t>(names_.size()); }
  torch::Device device() const override { return device_; }
  int pad_multiple(int imgsz) const override { return dynamic_ ? static_cast<int>(stride_) : static_cast<int>(imgsz_); }

  const std::vector<std::string>& names() const { return names_; }
  int64_t imgsz() const { return imgsz_; }
  bool dynamic() const { return dynamic_; }

 private:
  std::string what_;  // option=path, for errors
  torch::Device device_;
  torch::jit::Module module_;
  std::vector<std::string> names_;
  int64_t imgsz_ = 0, batch_ = 1, stride_ = 32;
  bool dynamic_ = false;
  bool rows_ = false;  // output0 holds detection rows (end-to-end or NMS inside), not the dense layout
  torch::ScalarType dtype_ = torch::kFloat32;
};

}  // namespace lucid::engine
