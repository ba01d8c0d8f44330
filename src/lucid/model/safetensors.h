// The safetensors format (8-byte little-endian header length, JSON header, raw little-endian data):
// the interchange format for weights with the reference implementation.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lucid::model {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Reads every tensor of a .safetensors file (CPU, contiguous). Errors name the file.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

// Writes tensors (moved to CPU, contiguous) to a temporary file and renames it into place.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Copies tensors into a module's parameters and buffers by name. Every module tensor must be
// present with the same shape (errors list what is missing, unexpected or mis-shaped).
void load_state(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& tensors,
                const std::string& source);

}  // namespace lucid::model
