#include "lucid/util/device.h"

#include "lucid/util/error.h"

namespace lucid::util {

bool cuda_usable() {
  static const bool usable = [] {
    try {
      if (!torch::cuda::is_available()) return false;
      auto t = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA));
      return t.sum().item<float>() == 1.0f;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return usable;
}

torch::Device parse_device(const std::string& spec) {
  if (spec == "cpu") return torch::Device(torch::kCPU);
  std::string s = spec;
  if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) s = "cuda:" + s;
  torch::Device d(torch::kCPU);
  try {
    d = torch::Device(s);
  } catch (const std::exception&) {
    throw UserError("device=" + spec + ": expected cpu, cuda, cuda:N or N");
  }
  if (d.is_cuda() && !cuda_usable()) throw UserError("device=" + spec + ": no usable CUDA device on this machine");
  return d;
}

}  // namespace lucid::util
