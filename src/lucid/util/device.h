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

// The canonical name of a device option ("cpu", "cuda", "cuda:N"; "0" is "cuda:0"; empty: the device
// parse_device picks), without asking whether it is usable: what a run record holds.
std::string device_name(const std::string& spec);

}  // namespace lucid::util

namespace lucid::util {

// The project's one autocast guard. bf16 = true: BF16 autocast on CUDA for the guard's lifetime;
// false: autocast off on CUDA and the CPU (the loss and every backward pass, recorded or not). The
// weight-cast cache is off in both: a recorded stage must not keep cached casts (they would live in
// its recording's memory), and native execution runs the very same casts, so both launch the same
// kernels. The previous state is restored on exit.
class Autocast {
 public:
  explicit Autocast(bool bf16);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool bf16_, cuda_, cpu_, cache_;
  c10::ScalarType dtype_;
};

}  // namespace lucid::util

namespace lucid::util {

struct CudaMemory {
  double allocated_mib = 0, reserved_mib = 0, peak_allocated_mib = 0, peak_reserved_mib = 0;
};
// The caching allocator's figures for a device (zeros when CUDA is not usable).
CudaMemory cuda_memory(int device = 0);

}  // namespace lucid::util
