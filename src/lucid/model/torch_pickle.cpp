#include "lucid/model/torch_pickle.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "lucid/util/error.h"

namespace lucid::model::pickle {

namespace {

// Keys and arguments nest this deep at most (a real checkpoint: under 10).
constexpr int kMaxKeyDepth = 32;
constexpr size_t kMaxDims = 64;

const std::map<std::string, torch::ScalarType>& storage_types() {
  static const std::map<std::string, torch::ScalarType> m{
      {"torch.DoubleStorage", torch::kFloat64}, {"torch.FloatStorage", torch::kFloat32},
      {"torch.HalfStorage", torch::kFloat16},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kInt64},     {"torch.IntStorage", torch::kInt32},
      {"torch.ShortStorage", torch::kInt16},    {"torch.CharStorage", torch::kInt8},
      {"torch.ByteStorage", torch::kUInt8},     {"torch.BoolStorage", torch::kBool}};
  return m;
}

// Globals with a fixed meaning here (see Machine::reduce); module classes are allowed by prefix.
const std::set<std::string>& allowed_globals() {
  static const std::set<std::string> s{"torch._utils._rebuild_tensor_v2",
                                       "torch._utils._rebuild_parameter",
                                       "torch._utils._rebuild_parameter_with_state",
                                       "collections.OrderedDict",
                                       "__builtin__.set",
                                       "builtins.set",
                                       "__builtin__.getattr",
                                       "builtins.getattr",
                                       "torch.Size",
                                       "pathlib.PosixPath",
                                       "pathlib.WindowsPath",
                                       "_codecs.encode",
                                       "numpy.dtype",
                                       "numpy.core.multiarray.scalar",
                                       "numpy._core.multiarray.scalar",
                                       "numpy.ndarray",
                                       "numpy.core.multiarray._reconstruct",
                                       "numpy._core.multiarray._reconstruct"};
  return s;
}

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || i + len > n) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace

bool is_module_class(const std::string& g) {
  return g.rfind("ultralytics.", 0) == 0 || g.rfind("torch.nn.modules.", 0) == 0;
}

const Node* Node::get(const std::string& key) const {
  if (kind != Kind::Dict || !index) return nullptr;
  std::string tagged(1, 's');  // as Machine::key_of tags a string key
  auto it = index->find(tagged.append(key));
  return it == index->end() ? nullptr : entries[it->second].second;
}

std::string Node::describe() const {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Set:
      return "set";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global " + text;
    case Kind::Object:
      return (cls ? cls->text : std::string("unknown")) + " object";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "value";
}

class Machine {
 public:
  Machine(Pickle& p, const std::string& bytes, const std::string& source) : p_(p), b_(bytes), src_(source) {}

  const Node* run() {
    while (true) {
      op_at_ = pos_;
      const unsigned char op = u8();
      if (op == '.') {  // STOP
        Node* v = pop();
        if (!marks_.empty() || !stack_.empty()) fail("values left on the stack at STOP");
        return v;
      }
      if (!literal(op) && !structure(op)) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  // Opcodes that push one value read from the stream, or an empty container; false for any other.
  bool literal(unsigned char op) {
    switch (op) {
      case '}':
        push(make(Kind::Dict));
        return true;  // EMPTY_DICT
      case ']':
        push(make(Kind::List));
        return true;  // EMPTY_LIST
      case ')':
        push(make(Kind::Tuple));
        return true;  // EMPTY_TUPLE
      case 0x8f:
        push(make(Kind::Set));
        return true;  // EMPTY_SET
      case 'N':
        push(make(Kind::None));
        return true;  // NONE
      case 'X':
        push(str(Kind::Str, u32()));
        return true;  // BINUNICODE
      case 0x8c:
        push(str(Kind::Str, u8()));
        return true;  // SHORT_BINUNICODE
      case 0x8d:
        push(str(Kind::Str, u64()));
        return true;  // BINUNICODE8
      case 'U':
        push(str(Kind::Str, u8()));
        return true;  // SHORT_BINSTRING (decoded as text)
      case 'T':
        push(str(Kind::Str, u32()));
        return true;  // BINSTRING
      case 'C':
        push(str(Kind::Bytes, u8()));
        return true;  // SHORT_BINBYTES
      case 'B':
        push(str(Kind::Bytes, u32()));
        return true;  // BINBYTES
      case 'K':
        push(integer(u8()));
        return true;  // BININT1
      case 'M':
        push(integer(le(take(2), 2)));
        return true;  // BININT2
      case 0x8a:
        push(long_int(u8()));
        return true;  // LONG1
      case 0x8b:
        push(long_int(u32()));
        return true;  // LONG4
      case 'J': {     // BININT
        Node* v = make(Kind::Int);
        v->integer = static_cast<int32_t>(u32());
        push(v);
        return true;
      }
      case 'G': {  // BINFLOAT (big-endian)
        const std::string raw = take(8);
        uint64_t bits = 0;
        for (char c : raw) bits = (bits << 8) | static_cast<unsigned char>(c);
        Node* v = make(Kind::Float);
        std::memcpy(&v->real, &bits, 8);
        push(v);
        return true;
      }
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        Node* v = make(Kind::Bool);
        v->boolean = op == 0x88;
        push(v);
        return true;
      }
      default:
        return false;
    }
  }

  // Opcodes that work on the stack: framing, marks, tuples, globals, calls, objects, containers and
  // the memo; false for any other.
  bool structure(unsigned char op) {
    switch (op) {
      case 0x80:  // PROTO
        if (u8() > 5) fail("unsupported pickle protocol");
        return true;
      case 0x95:
        take(8);
        return true;  // FRAME: a length hint only
      case '(':
        marks_.push_back(stack_.size());
        return true;  // MARK
      case 't': {     // TUPLE
        Node* t = make(Kind::Tuple);
        t->items = pop_mark();
        push(t);
        return true;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        if (stack_.size() < base() + n) fail("stack underflow");
        Node* t = make(Kind::Tuple);
        t->items.assign(stack_.end() - long(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(t);
        return true;
      }
      case 'c': {  // GLOBAL
        std::string module = line(), name = line();
        push(global(module, name));
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        Node* name = pop();
        Node* module = pop();
        if (module->kind != Kind::Str || name->kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
        push(global(module->text, name->text));
        return true;
      }
      case 'R': {  // REDUCE
        Node* args = pop();
        Node* callable = pop();
        push(reduce(callable, args));
        return true;
      }
      case 0x81:
        new_object();
        return true;  // NEWOBJ
      case 'b':
        build();
        return true;  // BUILD
      case 'q':
        memo_put(u8());
        return true;  // BINPUT
      case 'r':
        memo_put(u32());
        return true;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        return true;  // MEMOIZE
      case 'h':
        memo_get(u8());
        return true;  // BINGET
      case 'j':
        memo_get(u32());
        return true;  // LONG_BINGET
      case 'Q':
        push(persistent(pop()));
        return true;  // BINPERSID
      case 's': {     // SETITEM
        Node* v = pop();
        Node* k = pop();
        set_item(top(), k, v);
        return true;
      }
      case 'u': {  // SETITEMS
        auto kv = pop_mark();
        if (kv.size() % 2) fail("SETITEMS with an odd number of values");
        Node* d = top();
        for (size_t i = 0; i < kv.size(); i += 2) set_item(d, kv[i], kv[i + 1]);
        return true;
      }
      case 'a':
      case 'e':
      case 0x90:
        append(op);
        return true;  // APPEND, APPENDS, ADDITEMS
      default:
        return false;
    }
  }

  void new_object() {
    Node* args = pop();
    Node* cls = pop();
    if (cls->kind != Kind::Global || !is_module_class(cls->text) || args->kind != Kind::Tuple)
      fail("NEWOBJ of " + cls->describe() + " is not supported");
    Node* o = make(Kind::Object);
    o->cls = cls;
    o->items = args->items;
    push(o);
  }

  void build() {
    Node* state = pop();
    Node* obj = top();
    if (obj->kind != Kind::Object) fail("BUILD on a " + obj->describe() + " is not supported");
    obj->state = state;
  }

  void append(unsigned char op) {
    if (op == 'a') {
      Node* v = pop();
      Node* l = top();
      if (l->kind != Kind::List) fail("APPEND to a " + l->describe());
      l->items.push_back(v);
      return;
    }
    auto vs = pop_mark();
    Node* l = top();
    if (l->kind != (op == 'e' ? Kind::List : Kind::Set)) fail("APPENDS to a " + l->describe());
    l->items.insert(l->items.end(), vs.begin(), vs.end());
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(src_ + ": " + what + " (data.pkl byte " + std::to_string(op_at_) + ")");
  }

  std::string take(uint64_t n) {
    if (n > b_.size() - pos_) fail("the pickle ends early");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  static uint64_t le(const std::string& s, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }
  unsigned char u8() {
    if (pos_ >= b_.size()) fail("the pickle ends early");
    return static_cast<unsigned char>(b_[pos_++]);
  }
  uint32_t u32() { return static_cast<uint32_t>(le(take(4), 4)); }
  uint64_t u64() { return le(take(8), 8); }
  std::string line() {
    const size_t nl = b_.find('\n', pos_);
    if (nl == std::string::npos) fail("the pickle ends early");
    std::string s = b_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }

  Node* make(Kind k) {
    // Each opcode makes one node at most: more nodes than pickle bytes cannot come from a real file.
    if (p_.arena_.size() > b_.size()) fail("more objects than the pickle has bytes");
    p_.arena_.emplace_back();
    p_.arena_.back().kind = k;
    return &p_.arena_.back();
  }
  Node* integer(int64_t v) {
    Node* n = make(Kind::Int);
    n->integer = v;
    return n;
  }
  Node* long_int(uint64_t n) {
    if (n > 8) fail("an integer wider than 64 bits");
    const std::string raw = take(n);
    uint64_t v = 0;
    for (int i = int(n) - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(raw[i]);
    if (n && n < 8 && (static_cast<unsigned char>(raw[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<int64_t>(v));
  }
  Node* str(Kind k, uint64_t n) {
    Node* v = make(k);
    v->text = take(n);
    if (k == Kind::Str && !valid_utf8(v->text)) fail("a string that is not UTF-8");
    return v;
  }

  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Node* v) { stack_.push_back(v); }
  Node* top() {
    if (stack_.size() <= base()) fail("stack underflow");
    return stack_.back();
  }
  Node* pop() {
    Node* v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<Node*> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Node*> out(stack_.begin() + long(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void memo_put(uint64_t i) { memo_[i] = top(); }
  void memo_get(uint64_t i) {
    auto it = memo_.find(i);
    if (it == memo_.end()) fail("memo entry " + std::to_string(i) + " used before it is set");
    push(it->second);
  }

  // Dict keys compare by value for the hashable kinds real files use, by identity for objects:
  // a tag character, then the value's text.
  std::string key_of(const Node* k, int depth = 0) const {
    if (depth > kMaxKeyDepth) fail("a dict key nests too deep");
    std::string key;
    switch (k->kind) {
      case Kind::None:
        key.push_back('n');
        break;
      case Kind::Bool:
        key.append(k->boolean ? "i1" : "i0");
        break;
      case Kind::Int:
        key.push_back('i'), key.append(std::to_string(k->integer));
        break;
      case Kind::Float: {
        uint64_t bits;
        std::memcpy(&bits, &k->real, 8);
        key.push_back('f'), key.append(std::to_string(bits));
        break;
      }
      case Kind::Str:
        key.push_back('s'), key.append(k->text);
        break;
      case Kind::Bytes:
        key.push_back('b'), key.append(k->text);
        break;
      case Kind::Tuple:
        key.push_back('(');
        for (const Node* c : k->items) key.append(key_of(c, depth + 1)).push_back(',');
        key.push_back(')');
        break;
      case Kind::List:
      case Kind::Set:
      case Kind::Dict:
        fail("an unhashable dict key (" + k->describe() + ")");
      default:
        key.push_back('p'), key.append(std::to_string(reinterpret_cast<uintptr_t>(k)));
    }
    return key;
  }
  void set_item(Node* d, Node* k, Node* v) {
    if (d->kind != Kind::Dict) fail("SETITEM on a " + d->describe());
    if (!d->index) d->index = std::make_unique<std::unordered_map<std::string, size_t>>();
    auto [it, fresh] = d->index->emplace(key_of(k), d->entries.size());
    if (fresh)
      d->entries.emplace_back(k, v);
    else
      d->entries[it->second].second = v;
  }

  Node* global(const std::string& module, const std::string& name) {
    auto ident = [](const std::string& s, bool dots) {
      if (s.empty() || s.size() > 200) return false;
      for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dots && c == '.'))) return false;
      return true;
    };
    if (!ident(module, true) || !ident(name, false)) fail("a malformed pickle global");
    const std::string full = module + "." + name;
    if (!allowed_globals().count(full) && !storage_types().count(full) && !is_module_class(full))
      throw UserError(src_ + ": unsupported pickle global " + full);
    Node* g = make(Kind::Global);
    g->text = full;
    return g;
  }

  static bool is(const Node* n, Kind k) { return n && n->kind == k; }
  std::vector<int64_t> dims(const Node* t, const std::string& what) const {
    if (!is(t, Kind::Tuple) || t->items.size() > kMaxDims) fail("a tensor " + what + " that is not a short tuple");
    std::vector<int64_t> out;
    for (const Node* d : t->items) {
      if (!is(d, Kind::Int) || d->integer < 0) fail("a tensor " + what + " entry that is not a non-negative integer");
      out.push_back(d->integer);
    }
    return out;
  }

  Node* reduce(Node* callable, Node* args) {
    if (callable->kind != Kind::Global) fail("REDUCE of a " + callable->describe());
    if (args->kind != Kind::Tuple) fail("REDUCE with arguments that are not a tuple");
    const std::string& f = callable->text;
    const auto& a = args->items;
    auto argc = [&](size_t lo, size_t hi) {
      if (a.size() < lo || a.size() > hi) fail(f + " with " + std::to_string(a.size()) + " arguments");
    };
    if (f == "torch._utils._rebuild_tensor_v2") {  // (storage, offset, size, stride, requires_grad, hooks[, metadata])
      argc(6, 7);
      if (!is(a[0], Kind::Storage) || !is(a[1], Kind::Int) || a[1]->integer < 0)
        fail("a tensor rebuilt from something other than a storage and an offset");
      Node* t = make(Kind::Tensor);
      t->tensor = std::make_unique<TensorRef>();
      t->tensor->storage = a[0];
      t->tensor->offset = a[1]->integer;
      t->tensor->sizes = dims(a[2], "size");
      t->tensor->strides = dims(a[3], "stride");
      if (t->tensor->sizes.size() != t->tensor->strides.size()) fail("a tensor whose size and stride differ in length");
      return t;
    }
    if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
      argc(3, 4);
      if (!is(a[0], Kind::Tensor)) fail("a parameter rebuilt from a " + a[0]->describe());
      return a[0];
    }
    if (f == "collections.OrderedDict") {
      argc(0, 1);
      Node* d = make(Kind::Dict);
      if (!a.empty()) {
        if (!is(a[0], Kind::List) && !is(a[0], Kind::Tuple)) fail("OrderedDict of a " + a[0]->describe());
        for (Node* kv : a[0]->items) {
          if (!is(kv, Kind::Tuple) && !is(kv, Kind::List)) fail("OrderedDict item that is not a pair");
          if (kv->items.size() != 2) fail("OrderedDict item that is not a pair");
          set_item(d, kv->items[0], kv->items[1]);
        }
      }
      return d;
    }
    if (f == "__builtin__.set" || f == "builtins.set" || f == "torch.Size") {
      argc(0, 1);
      Node* s = make(f == "torch.Size" ? Kind::Tuple : Kind::Set);
      if (!a.empty()) {
        if (!is(a[0], Kind::List) && !is(a[0], Kind::Tuple)) fail(f + " of a " + a[0]->describe());
        s->items = a[0]->items;
      }
      return s;
    }
    if (f == "pathlib.PosixPath" || f == "pathlib.WindowsPath") {  // the parts, joined as the path's text
      Node* s = make(Kind::Str);
      for (const Node* part : a) {
        if (!is(part, Kind::Str)) fail("a path part that is not a string");
        if (!s->text.empty() && s->text.back() != '/') s->text += '/';
        s->text += part->text;
      }
      return s;
    }
    if (f == "_codecs.encode") {  // protocol 2's bytes: (text, 'latin1')
      argc(2, 2);
      if (!is(a[0], Kind::Str) || !is(a[1], Kind::Str) || (a[1]->text != "latin1" && a[1]->text != "latin-1"))
        fail("_codecs.encode other than latin1 of a string");
      Node* b = make(Kind::Bytes);
      const std::string& s = a[0]->text;  // valid UTF-8: each code point below 256 is one byte
      for (size_t i = 0; i < s.size(); ++i) {
        const unsigned c = static_cast<unsigned char>(s[i]);
        if (c < 0x80)
          b->text += char(c);
        else if ((c >> 5) == 6 && c <= 0xc3 && i + 1 < s.size())
          b->text += char(((c & 0x1f) << 6) | (s[++i] & 0x3f));
        else
          fail("_codecs.encode of a character beyond latin1");
      }
      return b;
    }
    if (f == "numpy.dtype" || f == "numpy.core.multiarray._reconstruct" || f == "numpy._core.multiarray._reconstruct" ||
        f == "__builtin__.getattr" || f == "builtins.getattr" || is_module_class(f)) {
      if ((f == "__builtin__.getattr" || f == "builtins.getattr") &&
          (a.size() != 2 || !is(a[0], Kind::Global) || !is_module_class(a[0]->text) || !is(a[1], Kind::Str)))
        fail("getattr other than of a module class");
      Node* o = make(Kind::Object);  // kept opaque: nothing is called
      o->cls = callable;
      o->items = a;
      return o;
    }
    if (f == "numpy.core.multiarray.scalar" || f == "numpy._core.multiarray.scalar") return numpy_scalar(callable, a);
    fail("cannot call " + f);
  }

  // A numpy scalar (dtype, raw bytes) as the plain number it holds, for the common little-endian
  // codes; other dtypes stay opaque.
  Node* numpy_scalar(Node* callable, const std::vector<Node*>& a) {
    if (a.size() != 2 || !is(a[0], Kind::Object) || !a[0]->cls || a[0]->cls->text != "numpy.dtype" ||
        !is(a[1], Kind::Bytes))
      fail("a numpy scalar that is not (dtype, bytes)");
    const Node* dt = a[0];
    std::string code = !dt->items.empty() && is(dt->items[0], Kind::Str) ? dt->items[0]->text : "";
    bool little = true;
    if (is(dt->state, Kind::Tuple) && dt->state->items.size() > 1 && is(dt->state->items[1], Kind::Str))
      little = dt->state->items[1]->text != ">";
    const std::string& raw = a[1]->text;
    auto bits = [&]() {
      uint64_t v = 0;
      for (int i = int(raw.size()) - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(raw[i]);
      return v;
    };
    if (little && code == "f8" && raw.size() == 8) {
      Node* v = make(Kind::Float);
      uint64_t u = bits();
      std::memcpy(&v->real, &u, 8);
      return v;
    }
    if (little && code == "f4" && raw.size() == 4) {
      Node* v = make(Kind::Float);
      uint32_t u = static_cast<uint32_t>(bits());
      float x;
      std::memcpy(&x, &u, 4);
      v->real = x;
      return v;
    }
    if (little && (code == "i8" || code == "i4") && raw.size() == (code == "i8" ? 8u : 4u))
      return integer(code == "i8" ? static_cast<int64_t>(bits()) : static_cast<int32_t>(bits()));
    if (code == "b1" && raw.size() == 1) {
      Node* v = make(Kind::Bool);
      v->boolean = raw[0] != 0;
      return v;
    }
    Node* o = make(Kind::Object);
    o->cls = callable;
    o->items = a;
    return o;
  }

  // ('storage', storage_type, key, location, numel), as torch.save writes it.
  Node* persistent(const Node* pid) {
    if (!is(pid, Kind::Tuple) || pid->items.size() != 5) fail("a persistent id that is not a storage");
    const auto& a = pid->items;
    if (!is(a[0], Kind::Str) || a[0]->text != "storage") fail("a persistent id that is not a storage");
    if (!is(a[1], Kind::Global) || !storage_types().count(a[1]->text)) fail("a storage of an unsupported type");
    if (!is(a[2], Kind::Str) || !is(a[3], Kind::Str) || !is(a[4], Kind::Int) || a[4]->integer < 0)
      fail("a malformed storage reference");
    Node* s = make(Kind::Storage);
    s->storage =
        std::make_unique<StorageRef>(StorageRef{storage_types().at(a[1]->text), a[2]->text, a[3]->text, a[4]->integer});
    return s;
  }

  Pickle& p_;
  const std::string& b_;
  const std::string& src_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Node*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Node*> memo_;
};

Pickle::Pickle(const std::string& bytes, const std::string& source) { root_ = Machine(*this, bytes, source).run(); }

}  // namespace lucid::model::pickle
