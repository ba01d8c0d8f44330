#include "lucid/util/device.h"

#include <optional>

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

std::string device_name(const std::string& spec) {
  if (spec.empty()) return cuda_usable() ? "cuda:0" : "cpu";
  if (spec == "cpu") return spec;
  std::string s = spec;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "cuda:" + s;
  const std::string expected = "option device=" + spec + ": expected cpu, cuda, cuda:N or N";
  std::optional<torch::Device> d;
  try {
    d = torch::Device(s);
  } catch (const std::exception&) {
    throw UserError(expected);
  }
  // PyTorch parses every device type it knows (mps, xpu, meta, ...); lucid runs on CPU and CUDA only,
  // and the others fail later with the library's own text.
  if (!d->is_cpu() && !d->is_cuda()) throw UserError(expected + " (lucid runs on CPU and CUDA devices only)");
  return d->str();
}

torch::Device parse_device(const std::string& spec) {
  const torch::Device d(device_name(spec));
  if (d.is_cuda() && !cuda_usable())
    throw UserError("option device=" + spec + ": no usable CUDA device on this machine");
  return d;
}

}  // namespace lucid::util

#include <ATen/autocast_mode.h>

namespace lucid::util {

Autocast::Autocast(bool bf16)
    : bf16_(bf16),
      cuda_(at::autocast::is_autocast_enabled(at::kCUDA)),
      cpu_(at::autocast::is_autocast_enabled(at::kCPU)),
      cache_(at::autocast::is_autocast_cache_enabled()),
      dtype_(at::autocast::get_autocast_dtype(at::kCUDA)) {
  at::autocast::set_autocast_cache_enabled(false);
  if (bf16_) {
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  } else {
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
}

Autocast::~Autocast() {
  at::autocast::set_autocast_enabled(at::kCUDA, cuda_);
  at::autocast::set_autocast_enabled(at::kCPU, cpu_);
  at::autocast::set_autocast_dtype(at::kCUDA, dtype_);
  at::autocast::set_autocast_cache_enabled(cache_);
  if (bf16_ && !cuda_) at::autocast::clear_cache();
}

}  // namespace lucid::util

#include <c10/cuda/CUDACachingAllocator.h>

namespace lucid::util {

CudaMemory cuda_memory(int device) {
  CudaMemory m;
  if (!cuda_usable()) return m;
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  constexpr double mib = 1024.0 * 1024.0;
  m.allocated_mib = static_cast<double>(stats.allocated_bytes[agg].current) / mib;
  m.reserved_mib = static_cast<double>(stats.reserved_bytes[agg].current) / mib;
  m.peak_allocated_mib = static_cast<double>(stats.allocated_bytes[agg].peak) / mib;
  m.peak_reserved_mib = static_cast<double>(stats.reserved_bytes[agg].peak) / mib;
  return m;
}

}  // namespace lucid::util
