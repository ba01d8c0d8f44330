// A restricted pickle machine for the objects torch.save writes into an Ultralytics checkpoint.
// Nothing in the pickle is ever called: each allowed global has a fixed meaning here (a tensor
// rebuild, an ordered dict, a set, a module class kept as an opaque object with its BUILD state,
// ...), and any other global or opcode is refused. Every node is kept in one arena owned by the
// Pickle, so cycles and deep chains cost no recursion to free, and the node count, memo, stack and
// string lengths are bounded by the pickle's own size.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace lucid::model::pickle {

enum class Kind { None, Bool, Int, Float, Str, Bytes, Tuple, List, Set, Dict, Global, Object, Storage, Tensor };

// A storage reference (BINPERSID): its entry is <prefix>/data/<key>, holding numel elements of dtype.
struct StorageRef {
  torch::ScalarType dtype = torch::kFloat32;
  std::string key, location;
  int64_t numel = 0;
};

// A tensor view (_rebuild_tensor_v2): its bytes are not read here.
struct TensorRef {
  const struct Node* storage = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

struct Node {
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;                              // Str and Bytes; Global: "module.name"
  std::vector<Node*> items;                      // Tuple, List, Set; Object: the arguments it was made with
  std::vector<std::pair<Node*, Node*>> entries;  // Dict, in insertion order
  std::unique_ptr<std::unordered_map<std::string, size_t>> index;  // Dict: key -> position
  const Node* cls = nullptr;                                       // Object: its class (a Global)
  Node* state = nullptr;                                           // Object: what BUILD gave it
  std::unique_ptr<StorageRef> storage;
  std::unique_ptr<TensorRef> tensor;

  // Dict lookup by a string key; nullptr when absent (or not a dict).
  const Node* get(const std::string& key) const;
  // "dict", "ultralytics.nn.tasks.SegmentationModel object", ... for messages.
  std::string describe() const;
};

class Pickle {
 public:
  // Runs the machine over bytes; every error is a UserError starting with `source`.
  Pickle(const std::string& bytes, const std::string& source);
  Pickle(const Pickle&) = delete;
  Pickle& operator=(const Pickle&) = delete;
  const Node* root() const { return root_; }

 private:
  std::deque<Node> arena_;
  const Node* root_ = nullptr;
  friend class Machine;
};

// Whether a Global names a module class kept as an opaque object (under ultralytics. or torch.nn.modules.).
bool is_module_class(const std::string& global);

}  // namespace lucid::model::pickle
