// Device selection. torch::cuda::is_available() can report a device where the driver cannot run
// the CUDA runtime (CPU machines with the toolkit's driver stub), so usability is probed once.
#pragma once
#include <torch/torch.h>

#include <string>

namespace lucid::util {

bool cuda_usable();

// "cpu", "cuda", "cuda:N" or "0" (-> cuda:0); empty: cuda:0 when usable, else the CPU (the
// default of every command's device option). A CUDA device that is not usable is a UserError.
torch::Device parse_device(const std::string& spec);

}  // namespace lucid::util

namespace lucid::util {

// BF16 autocast on CUDA for the guard's lifetime (no-op when disabled or on the CPU).
class Bf16Autocast {
 public:
  explicit Bf16Autocast(bool enabled);
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool enabled_, previous_ = false, previous_cache_ = true;
};

// Autocast off for the guard's lifetime: backward passes run outside autocast, recorded or not.
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool previous_;
};

}  // namespace lucid::util

namespace lucid::util {

struct CudaMemory {
  double allocated_mib = 0, reserved_mib = 0, peak_allocated_mib = 0, peak_reserved_mib = 0;
};
// The caching allocator's figures for a device (zeros when CUDA is not usable).
CudaMemory cuda_memory(int device = 0);

}  // namespace lucid::util
