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
  if (spec.empty()) return cuda_usable() ? torch::Device("cuda:0") : torch::Device(torch::kCPU);
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

#include <ATen/autocast_mode.h>

namespace lucid::util {

// The weight-cast cache stays off: a recorded stage must not keep cached casts (they would live in
// the recording's memory), and native execution runs the very same casts so both launch the same
// kernels.
Bf16Autocast::Bf16Autocast(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  previous_ = at::autocast::is_autocast_enabled(at::kCUDA);
  previous_cache_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_cache_enabled(false);
}

Bf16Autocast::~Bf16Autocast() {
  if (!enabled_) return;
  at::autocast::set_autocast_enabled(at::kCUDA, previous_);
  at::autocast::set_autocast_cache_enabled(previous_cache_);
  if (!previous_) at::autocast::clear_cache();
}

AutocastOff::AutocastOff() : previous_(at::autocast::is_autocast_enabled(at::kCUDA)) {
  at::autocast::set_autocast_enabled(at::kCUDA, false);
}

AutocastOff::~AutocastOff() { at::autocast::set_autocast_enabled(at::kCUDA, previous_); }

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
