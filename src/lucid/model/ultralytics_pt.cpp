#include "lucid/model/ultralytics_pt.h"

#include <filesystem>
#include <fstream>

#include "lucid/model/torch_pickle.h"
#include "lucid/model/torch_zip.h"
#include "lucid/util/class_names.h"
#include "lucid/util/error.h"

namespace lucid::model {

namespace {

using pickle::Kind;
using pickle::Node;

// Modules and values nest far less than this in a real checkpoint; the bound also stops cycles.
constexpr int kMaxDepth = 64;

class Reader {
 public:
  Reader(const TorchZip& zip, std::string prefix) : zip_(zip), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& what) const { throw UserError(zip_.path() + ": " + what); }

  nlohmann::json to_json(const Node* n, const std::string& where, int depth = 0) const {
    if (depth > kMaxDepth) fail(where + " nests too deep");
    switch (n->kind) {
      case Kind::None:
        return nullptr;
      case Kind::Bool:
        return n->boolean;
      case Kind::Int:
        return n->integer;
      case Kind::Float:
        return n->real;
      case Kind::Str:
        return n->text;
      case Kind::Tuple:
      case Kind::List:
      case Kind::Set: {
        auto a = nlohmann::json::array();
        for (const Node* c : n->items) a.push_back(to_json(c, where, depth + 1));
        return a;
      }
      case Kind::Dict: {
        auto o = nlohmann::json::object();
        for (const auto& [k, v] : n->entries) {
          std::string key;
          if (k->kind == Kind::Str)
            key = k->text;
          else if (k->kind == Kind::Int)
            key = std::to_string(k->integer);
          else
            fail(where + " has a " + k->describe() + " key");
          o[key] = to_json(v, where + " '" + key + "'", depth + 1);
        }
        return o;
      }
      default:
        fail(where + " holds a " + n->describe() + ", which has no plain-data form");
    }
  }

  std::vector<std::string> names(const Node* n) const {
    std::vector<std::string> out;
    if (!n || n->kind == Kind::None) return out;
    if (n->kind == Kind::List || n->kind == Kind::Tuple) {
      for (const Node* c : n->items) {
        if (c->kind != Kind::Str) fail("model names hold a " + c->describe());
        util::check_class_name(c->text, zip_.path() + ": model names entry " + std::to_string(out.size()));
        out.push_back(c->text);
      }
      return out;
    }
    if (n->kind != Kind::Dict) fail("model names are a " + n->describe() + ", not a dict or list");
    out.resize(n->entries.size());
    std::vector<bool> seen(out.size());
    for (const auto& [k, v] : n->entries) {
      if (k->kind != Kind::Int || k->integer < 0 || static_cast<uint64_t>(k->integer) >= out.size() || seen[k->integer])
        fail("model names are not indexed 0.." + std::to_string(out.size() - 1));
      if (v->kind != Kind::Str) fail("model name " + std::to_string(k->integer) + " is a " + v->describe());
      util::check_class_name(v->text, zip_.path() + ": model name " + std::to_string(k->integer));
      seen[k->integer] = true;
      out[k->integer] = v->text;
    }
    return out;
  }

  // torch's state_dict(): own parameters, then persistent buffers, then each child's, skipping None.
  void walk(const Node* module, const std::string& prefix, std::map<std::string, torch::Tensor>& out, int depth) {
    const std::string where = prefix.empty() ? "the model" : "module '" + prefix.substr(0, prefix.size() - 1) + "'";
    if (depth > kMaxDepth) fail("modules nest too deep");
    if (module->kind != Kind::Object || !module->cls || !pickle::is_module_class(module->cls->text) || !module->state ||
        module->state->kind != Kind::Dict)
      fail(where + " is a " + module->describe() + ", not a torch module");
    const Node* st = module->state;
    auto section = [&](const char* key) {
      const Node* d = st->get(key);
      if (!d || d->kind != Kind::Dict) fail(where + " has no " + key + " dict");
      return d;
    };
    std::set<std::string> transient;
    if (const Node* s = st->get("_non_persistent_buffers_set")) {
      if (s->kind != Kind::Set && s->kind != Kind::List) fail(where + " has a malformed _non_persistent_buffers_set");
      for (const Node* n : s->items)
        if (n->kind == Kind::Str) transient.insert(n->text);
    }
    for (const char* key : {"_parameters", "_buffers"}) {
      for (const auto& [k, v] : section(key)->entries) {
        if (k->kind != Kind::Str) fail(where + " has a " + k->describe() + " tensor name");
        if (v->kind == Kind::None || (key[1] == 'b' && transient.count(k->text))) continue;
        if (v->kind != Kind::Tensor) fail(where + " " + key + " '" + k->text + "' is a " + v->describe());
        const std::string name = prefix + k->text;
        if (!out.emplace(name, tensor(v, name)).second) fail("tensor '" + name + "' appears twice");
      }
    }
    for (const auto& [k, v] : section("_modules")->entries) {
      if (k->kind != Kind::Str) fail(where + " has a " + k->describe() + " submodule name");
      if (v->kind == Kind::None) continue;
      walk(v, prefix + k->text + ".", out, depth + 1);
    }
  }

 private:
  // The tensor as a view of its storage's bytes, after checking that the storage's declared length
  // equals its entry's and that the view lies inside it with no more elements than it holds.
  torch::Tensor tensor(const Node* n, const std::string& name) {
    const auto& t = *n->tensor;
    const auto& s = *t.storage->storage;
    const std::string entry = prefix_ + "/data/" + s.key;
    if (!zip_.has(entry)) fail("tensor '" + name + "' refers to storage '" + s.key + "', which the archive lacks");
    const uint64_t bytes = zip_.size(entry), elem = c10::elementSize(s.dtype);
    if (bytes % elem || static_cast<uint64_t>(s.numel) != bytes / elem)
      fail("storage '" + s.key + "' declares " + std::to_string(s.numel) + " elements of " + std::to_string(elem) +
           " bytes but holds " + std::to_string(bytes) + " bytes");
    // Elements the view reaches: offset + 1 + sum((size - 1) * stride), none when a size is zero.
    uint64_t need = static_cast<uint64_t>(t.offset), numel = 1;
    bool empty = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) empty |= t.sizes[d] == 0;
    if (!empty) {
      uint64_t reach = 1;
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        uint64_t step;
        if (__builtin_mul_overflow(static_cast<uint64_t>(t.sizes[d] - 1), static_cast<uint64_t>(t.strides[d]), &step) ||
            __builtin_add_overflow(reach, step, &reach) ||
            __builtin_mul_overflow(numel, static_cast<uint64_t>(t.sizes[d]), &numel))
          fail("tensor '" + name + "' has a shape larger than any file");
      }
      if (__builtin_add_overflow(need, reach, &need)) fail("tensor '" + name + "' has a shape larger than any file");
    }
    if (need > static_cast<uint64_t>(s.numel))
      fail("tensor '" + name + "' needs " + std::to_string(need) + " elements of storage '" + s.key +
           "', which holds " + std::to_string(s.numel));
    if (numel > static_cast<uint64_t>(s.numel) && !empty)
      fail("tensor '" + name + "' has more elements than its storage '" + s.key + "' (overlapping strides)");
    auto key = std::make_pair(s.key, s.dtype);
    auto it = storages_.find(key);
    if (it == storages_.end()) {
      auto base = torch::empty({s.numel}, torch::TensorOptions().dtype(s.dtype));
      zip_.read_into(entry, base.data_ptr());
      it = storages_.emplace(key, base).first;
    }
    // A view of the storage: tensors sharing a storage share its bytes, so nothing is read or held twice.
    return it->second.as_strided(t.sizes, t.strides, t.offset);
  }

  const TorchZip& zip_;
  std::string prefix_;
  std::map<std::pair<std::string, torch::ScalarType>, torch::Tensor> storages_;
};

// The archive's one folder holding data.pkl (torch.save names it after the file or "archive").
std::string archive_prefix(const TorchZip& zip) {
  std::string prefix;
  bool torchscript = false;
  for (const auto& n : zip.names()) {
    const size_t slash = n.find('/');
    if (slash == std::string::npos) continue;
    const std::string rest = n.substr(slash + 1);
    if (rest == "constants.pkl") torchscript = true;
    if (rest != "data.pkl") continue;
    if (!prefix.empty()) throw UserError(zip.path() + ": the archive holds more than one data.pkl");
    prefix = n.substr(0, slash);
  }
  if (torchscript)
    throw UserError(zip.path() +
                    ": a TorchScript archive, not an Ultralytics checkpoint (give the original .pt weights)");
  if (prefix.empty()) throw UserError(zip.path() + ": a zip archive without data.pkl, not a torch.save checkpoint");
  return prefix;
}

}  // namespace

bool is_torch_zip(const std::string& path) { return starts_like_zip(path); }

UltralyticsWeights read_ultralytics_pt(const std::string& path) {
  if (!starts_like_zip(path)) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": is a folder, not a weights file");
    if (!std::ifstream(path)) throw UserError(path + ": cannot open");
    throw UserError(path + ": not a PyTorch zip archive (files of torch.save before PyTorch 1.6 are not supported)");
  }
  TorchZip zip(path);
  const std::string prefix = archive_prefix(zip);
  if (zip.has(prefix + "/byteorder")) {
    const std::string order = zip.read(prefix + "/byteorder");
    if (order != "little")
      throw UserError(path + ": storages are " +
                      (order == "big" ? "big-endian" : "of unknown byte order '" + order.substr(0, 16) + "'") +
                      "; only little-endian checkpoints are supported");
  }
  const pickle::Pickle pk(zip.read(prefix + "/data.pkl"), path);
  const Node* root = pk.root();
  if (root->kind != Kind::Dict) throw UserError(path + ": the checkpoint is a " + root->describe() + ", not a dict");

  UltralyticsWeights w;
  const Node* module = root->get("ema");
  w.entry = "ema";
  if (!module || module->kind == Kind::None) {
    module = root->get("model");
    w.entry = "model";
  }
  if (!module || module->kind == Kind::None)
    throw UserError(path + ": the checkpoint holds neither 'ema' nor 'model' (not an Ultralytics checkpoint)");
  if (module->kind != Kind::Object)
    throw UserError(path + ": the checkpoint's '" + w.entry + "' is a " + module->describe() + ", not a model");
  Reader reader(zip, prefix);
  reader.walk(module, "", w.state, 0);
  if (const Node* yaml = module->state->get("yaml"); yaml && yaml->kind != Kind::None) {
    if (yaml->kind != Kind::Dict) reader.fail("the model's yaml is a " + yaml->describe() + ", not a dict");
    w.yaml = reader.to_json(yaml, "the model's yaml").dump();
  }
  w.names = reader.names(module->state->get("names"));
  if (const Node* args = root->get("train_args"); args && args->kind != Kind::None) {
    if (args->kind != Kind::Dict) reader.fail("train_args is a " + args->describe() + ", not a dict");
    w.train_args = reader.to_json(args, "train_args");
  }
  return w;
}

}  // namespace lucid::model
