#include "lucid/model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lucid/model/model.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::model {

namespace {

const std::map<std::string, torch::ScalarType>& dtypes() {
  static const std::map<std::string, torch::ScalarType> m{
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
      {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},   {"I8", torch::kInt8},
      {"U8", torch::kUInt8},    {"BOOL", torch::kBool}};
  return m;
}

std::string dtype_name(torch::ScalarType t) {
  for (const auto& [k, v] : dtypes())
    if (v == t) return k;
  throw std::runtime_error(std::string("safetensors: unsupported dtype ") + c10::toString(t));
}

}  // namespace

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  auto file_size = std::filesystem::file_size(path);
  if (!in || header_len > file_size - 8) throw UserError(path + ": not a safetensors file (bad header length)");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    throw UserError(path + ": not a safetensors file (" + e.what() + ")");
  }
  const uint64_t data_start = 8 + header_len, data_len = file_size - data_start;
  std::vector<char> data(data_len);
  in.read(data.data(), static_cast<std::streamsize>(data_len));
  if (!in) throw UserError(path + ": truncated");
  std::map<std::string, torch::Tensor> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& d = it.value();
    auto found = dtypes().find(d.at("dtype").get<std::string>());
    if (found == dtypes().end()) throw UserError(path + ": tensor " + it.key() + " has an unsupported dtype");
    std::vector<int64_t> shape = d.at("shape").get<std::vector<int64_t>>();
    auto offsets = d.at("data_offsets").get<std::vector<uint64_t>>();
    auto t = torch::empty(shape, torch::TensorOptions().dtype(found->second));
    uint64_t nbytes = t.numel() * t.element_size();
    if (offsets.size() != 2 || offsets[1] - offsets[0] != nbytes || offsets[1] > data_len)
      throw UserError(path + ": tensor " + it.key() + " has inconsistent offsets");
    std::memcpy(t.data_ptr(), data.data() + offsets[0], nbytes);
    out.emplace(it.key(), t);
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json j;
  if (!metadata.empty()) j["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    uint64_t nbytes = c.numel() * c.element_size();
    j[name] = {{"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    cpu.push_back(c);
  }
  std::string header = j.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keep data 8-byte aligned
  util::write_atomically(path, [&](std::ostream& out) {
    uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(header.data(), static_cast<std::streamsize>(len));
    for (const auto& c : cpu) out.write(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  });
}

void load_state(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& tensors,
                const std::string& source) {
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& [name, dst] : state_dict(module)) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      missing.push_back(name);
      continue;
    }
    used.insert(name);
    if (it->second.sizes() != dst.sizes()) {
      std::ostringstream o;
      o << name << " " << it->second.sizes() << " vs model " << dst.sizes();
      mismatched.push_back(o.str());
      continue;
    }
    dst.copy_(it->second.to(dst.dtype()));
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : tensors)
    if (!used.count(name)) unexpected.push_back(name);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 5) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  std::string err;
  if (!missing.empty()) err += " missing: " + join(missing) + ";";
  if (!unexpected.empty()) err += " unexpected: " + join(unexpected) + ";";
  if (!mismatched.empty()) err += " shape mismatch: " + join(mismatched) + ";";
  if (!err.empty()) throw UserError(source + ": weights do not fit the model:" + err);
}

}  // namespace lucid::model
