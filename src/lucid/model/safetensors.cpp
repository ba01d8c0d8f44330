#include "lucid/model/safetensors.h"

#include <algorithm>
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

namespace {

// The format's own bound on the header (the reference implementation refuses larger ones).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A header nests at most three deep (file object, entry object, shape array); refusing deeper
// text before parsing bounds the parser's memory by the header's length.
bool nesting_within(const std::string& text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}')
      --depth;
  }
  return true;
}

uint64_t unsigned_field(const nlohmann::json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned()) throw UserError(path + ": " + what + " is not a non-negative integer");
  return v.get<uint64_t>();
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": is a folder, not a safetensors file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(path + ": cannot read its size");
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw UserError(path + ": not a safetensors file (shorter than its 8-byte header length)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len < 2 || header_len > kMaxHeaderBytes || header_len > file_size - 8)
    throw UserError(path + ": not a safetensors file (header length " + std::to_string(header_len) +
                    " does not fit a file of " + std::to_string(file_size) + " bytes)");
  std::string text(header_len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_len))) throw UserError(path + ": truncated header");
  if (!nesting_within(text, 3)) throw UserError(path + ": not a safetensors file (header nests too deep)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UserError(path + ": not a safetensors file (the header is not valid JSON)");
  }
  if (!j.is_object()) throw UserError(path + ": not a safetensors file (the header is not a JSON object)");

  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  const uint64_t data_len = file_size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& d = it.value();
    if (name == "__metadata__") {
      if (!d.is_object()) throw UserError(path + ": __metadata__ is not a map of strings");
      for (auto m = d.begin(); m != d.end(); ++m) {
        if (!m.value().is_string()) throw UserError(path + ": __metadata__ value '" + m.key() + "' is not a string");
        h.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!d.is_object() || !d.contains("dtype") || !d.contains("shape") || !d.contains("data_offsets"))
      throw UserError(path + ": " + where + " lacks dtype, shape or data_offsets");
    SafetensorsEntry e;
    e.name = name;
    if (!d["dtype"].is_string()) throw UserError(path + ": " + where + " has a dtype that is not a string");
    auto found = dtypes().find(d["dtype"].get<std::string>());
    if (found == dtypes().end())
      throw UserError(path + ": " + where + " has an unsupported dtype " + d["dtype"].get<std::string>());
    e.dtype = found->second;
    const auto& shape = d["shape"];
    if (!shape.is_array() || shape.size() > 16) throw UserError(path + ": " + where + " has a malformed shape");
    uint64_t nbytes = c10::elementSize(e.dtype);
    for (const auto& dim : shape) {
      uint64_t n = unsigned_field(dim, path, where + " shape entry");
      if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(nbytes, n, &nbytes) ||
          nbytes > static_cast<uint64_t>(INT64_MAX))
        throw UserError(path + ": " + where + " has a shape larger than any file");
      e.shape.push_back(static_cast<int64_t>(n));
    }
    const auto& off = d["data_offsets"];
    if (!off.is_array() || off.size() != 2) throw UserError(path + ": " + where + " data_offsets is not a pair");
    e.begin = unsigned_field(off[0], path, where + " data_offsets");
    e.end = unsigned_field(off[1], path, where + " data_offsets");
    if (e.begin > e.end || e.end > data_len)
      throw UserError(path + ": " + where + " data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                      ") lie outside the data section of " + std::to_string(data_len) + " bytes");
    if (e.end - e.begin != nbytes)
      throw UserError(path + ": " + where + " holds " + std::to_string(e.end - e.begin) +
                      " bytes but its shape needs " + std::to_string(nbytes));
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t expected = 0;
  for (const auto& e : h.tensors) {
    if (e.begin != expected)
      throw UserError(path + ": tensor '" + e.name + "' " + (e.begin < expected ? "overlaps another" : "leaves a gap"));
    expected = e.end;
  }
  if (expected != data_len)
    throw UserError(path + ": the data section holds " + std::to_string(data_len) + " bytes but the tensors cover " +
                    std::to_string(expected));
  return h;
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  const auto h = read_safetensors_header(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open");
  in.seekg(static_cast<std::streamoff>(h.data_start));
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : h.tensors) {  // in data order: one forward pass over the file
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    const auto nbytes = static_cast<std::streamsize>(e.end - e.begin);
    if (nbytes > 0 && !in.read(static_cast<char*>(t.data_ptr()), nbytes))
      throw UserError(path + ": truncated while reading tensor '" + e.name + "' (did the file change?)");
    out.emplace(e.name, t);
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
    j[name] = {{"dtype", dtype_name(c.scalar_type())},
               {"shape", c.sizes().vec()},
               {"data_offsets", {offset, offset + nbytes}}};
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
  std::vector<std::string> missing, mismatched, non_finite;
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
    if (it->second.is_floating_point() && !torch::isfinite(it->second).all().item<bool>()) {
      non_finite.push_back(name);  // weights are never NaN or infinite; such a file is damaged
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
  if (!non_finite.empty()) err += " NaN or infinite values in: " + join(non_finite) + ";";
  if (!err.empty()) throw UserError(source + ": weights do not fit the model:" + err);
}

}  // namespace lucid::model
