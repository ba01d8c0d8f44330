// `lucid checks`, as the reference's `yolo checks`: what this build and machine are. Versions (lucid,
// LibTorch, the CUDA runtime and cuDNN of the torch build, the compiler), the devices, the build's
// optional parts (each found or not when the build was configured, see CMakeLists.txt) and the
// settings file. One `key  value` line each; nothing is written.
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#include <sys/utsname.h>
#include <torch/version.h>

#include <cstdio>
#include <thread>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/config/user_settings.h"
#include "lucid/data/video.h"
#include "lucid/dist/process_group.h"
#include "lucid/plot/canvas.h"
#include "lucid/util/device.h"

namespace lucid::cli {

namespace {

void row(const std::string& key, const std::string& value) { std::printf("%-23s%s\n", key.c_str(), value.c_str()); }

std::string compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

// cuDNN's version number as major.minor.patch (cuDNN 9 counts major * 10000, earlier ones * 1000),
// with the number itself as torch.backends.cudnn.version() gives it.
std::string cudnn_version(long v) {
  const long major = v >= 90000 ? v / 10000 : v / 1000;
  const long minor = v >= 90000 ? v % 10000 / 100 : v % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100) + " (" +
         std::to_string(v) + ")";
}

void versions() {
  row("lucid", LUCID_VERSION);
  row("LibTorch", TORCH_VERSION);
  // The CUDA hooks exist only in a torch build with CUDA; elsewhere every query throws.
  const auto& cuda = at::detail::getCUDAHooks();
  std::string cudart = "not built (a torch build without CUDA)", cudnn = cudart;
  try {
    const long v = cuda.versionCUDART();
    cudart = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    try {
      cudnn = cudnn_version(cuda.versionRuntimeCuDNN());
    } catch (const std::exception&) {
      cudnn = "not loaded (built with " + cudnn_version(cuda.versionCuDNN()) + ")";
    }
  } catch (const std::exception&) {
  }
  row("CUDA", cudart);
  row("cuDNN", cudnn);
  row("compiler", compiler());
}

void devices() {
  utsname u{};
  if (uname(&u) == 0) row("OS", std::string(u.sysname) + " " + u.release + " " + u.machine);
  row("CPU count", std::to_string(std::thread::hardware_concurrency()));
  if (!util::cuda_usable()) {
    row("devices", "cpu (no usable CUDA device)");
    return;
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  row("devices", "cpu, " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s"));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      row("cuda:" + std::to_string(i), "properties not readable");
      continue;
    }
    char line[640];
    std::snprintf(line, sizeof line, "%s, %.1f GiB, compute capability %d.%d", p.name,
                  static_cast<double>(p.totalGlobalMem) / (1 << 30), p.major, p.minor);
    row("cuda:" + std::to_string(i), line);
  }
}

void optional_parts() {
  auto part = [](const std::string& name, bool built, const std::string& without) {
    row(name, built ? "yes" : "no (" + without + ")");
  };
  part("FFmpeg", data::video::available(), "video sources are refused");
  part("Gloo", dist::gloo_built(), "no data-parallel training on the CPU");
  part("NCCL", dist::nccl_built(), "no data-parallel training on GPUs");
  part("cairo", plot::available(), "plots are skipped");
#ifdef LUCID_CUDA_KERNELS
  part("fused CUDA kernels", true, "");
#else
  part("fused CUDA kernels", false, "the ATen forms run instead");
#endif
}

}  // namespace

int checks_command(const std::vector<std::string>& args) {
  config::Options options("checks", {});
  if (!options.parse_or_help(args)) return 0;
  versions();
  devices();
  optional_parts();
  const auto file = config::settings_file();
  std::error_code ec;
  row("settings", file.string() + (std::filesystem::exists(file, ec) ? "" : " (not written: the defaults)"));
  return 0;
}

}  // namespace lucid::cli
