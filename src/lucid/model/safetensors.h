// The safetensors format (8-byte little-endian header length, JSON header, raw little-endian data):
// the interchange format for weights with the reference implementation. Files may come from
// strangers: the header is validated whole before anything is allocated from it.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace lucid::model {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// One tensor's entry in a validated header: offsets are relative to the data section and lie in it.
struct SafetensorsEntry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// A validated header: every dtype known, every shape non-negative with a byte count equal to its
// offsets' span, the spans ordered, disjoint and covering the data section exactly (as the format
// requires), the metadata a map of strings.
struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> tensors;  // in data order
  uint64_t data_start = 0;                // file offset of the data section
};

// Reads and validates the header only. Errors name the file.
SafetensorsHeader read_safetensors_header(const std::string& path);

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
