// Device selection. torch::cuda::is_available() can report a device where the driver cannot run
// the CUDA runtime (CPU machines with the toolkit's driver stub), so usability is probed once.
#pragma once
#include <torch/torch.h>

#include <string>

namespace lucid::util {

bool cuda_usable();

// "cpu", "cuda", "cuda:N" or "0" (-> cuda:0); a CUDA device that is not usable is a UserError.
torch::Device parse_device(const std::string& spec);

}  // namespace lucid::util
