#include "lucid/model/model.h"

#include <cfenv>
#include <cmath>
#include <set>
#include <sstream>
#include <unordered_set>

#include "lucid/util/error.h"

namespace lucid::model {

namespace {

int64_t make_divisible(double x, int64_t divisor) { return static_cast<int64_t>(std::ceil(x / divisor)) * divisor; }

// What a model file may ask the builder to allocate. The reference's widest layer has 1280 channels
// and its largest segmentation model about 62 million parameters; a spec read from a stranger's
// weights (width, channel counts, repeats, kernel sizes) could otherwise ask for hundreds of GB
// before a single weight is read.
constexpr int64_t kMaxChannels = 8192;
constexpr int64_t kMaxKernel = 31;
constexpr double kMaxParameters = 1e9;

// An upper bound on a base layer's parameters, known before it is made: outer x (c1 + (2 + 4 x
// inner) x hidden) x hidden x k^2, hidden = c2 x max(1, e). A block's first convolution reads c1
// channels; C2f, C3, C3k2 and C2PSA add one more and at most four per inner repeat, none wider than
// hidden or with a larger kernel.
double layer_parameter_bound(int64_t outer, int64_t inner, int64_t c1, int64_t c2, double e, int64_t k) {
  const double hidden = static_cast<double>(c2) * std::max(1.0, e);
  return static_cast<double>(outer) * (static_cast<double>(c1) + (2.0 + 4.0 * static_cast<double>(inner)) * hidden) *
         hidden * static_cast<double>(k * k);
}

// The head's parameters at most: per level, the box, class and mask branches (two 3x3 convolutions
// of the widest input each, then the outputs), twice with the one-to-one branch, and the prototypes.
double head_parameter_bound(const std::vector<int64_t>& ch, int64_t nc, int64_t nm, int64_t npr, int64_t reg_max) {
  double widest = static_cast<double>(npr);
  for (auto c : ch) widest = std::max(widest, static_cast<double>(c));
  const double per_level = 3 * 2 * widest * widest * 9 + widest * static_cast<double>(nc + nm + 4 * reg_max);
  return static_cast<double>(ch.size()) * per_level * 2 + 3 * widest * widest * 9;
}

// Python's round(): half to even.
int64_t py_round(double x) {
  std::fesetround(FE_TONEAREST);
  return static_cast<int64_t>(std::nearbyint(x));
}

// A resolved layer argument, printable like the reference's Python list.
struct Arg {
  enum Kind { Int, Float, Bool, None, Str, List } kind = None;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<Arg> list;

  static Arg of(int64_t v) {
    Arg a;
    a.kind = Int;
    a.i = v;
    return a;
  }
  static Arg of_bool(bool v) {
    Arg a;
    a.kind = Bool;
    a.b = v;
    return a;
  }

  std::string str() const {
    std::ostringstream o;
    switch (kind) {
      case Int:
        o << i;
        break;
      case Float:
        o << f;
        break;
      case Bool:
        o << (b ? "True" : "False");
        break;
      case None:
        o << "None";
        break;
      case Str:
        o << "'" << s << "'";
        break;
      case List: {
        o << "[";
        for (size_t k = 0; k < list.size(); ++k) o << (k ? ", " : "") << list[k].str();
        o << "]";
      }
    }
    return o.str();
  }
};

struct ArgReader {
  const config::ModelSpec& spec;
  const config::LayerRow& row;

  [[noreturn]] void fail(const std::string& msg) const { throw error_at(spec.path, row.line, row.module + ": " + msg); }

  Arg parse(const YAML::Node& n) const {
    Arg a;
    if (n.IsSequence()) {
      a.kind = Arg::List;
      for (const auto& x : n) a.list.push_back(parse(x));
      return a;
    }
    auto text = n.Scalar();
    if (text == "nc") return Arg::of(spec.nc);
    if (text == "None" || text == "null" || text == "~") return a;
    if (text == "True" || text == "true") return Arg::of_bool(true);
    if (text == "False" || text == "false") return Arg::of_bool(false);
    try {
      size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used == text.size()) return Arg::of(v);
      double d = std::stod(text, &used);
      if (used == text.size()) {
        a.kind = Arg::Float;
        a.f = d;
        return a;
      }
    } catch (const std::exception&) {
    }
    a.kind = Arg::Str;
    a.s = text;
    return a;
  }

  std::vector<Arg> all() const {
    std::vector<Arg> out;
    for (const auto& x : row.args) out.push_back(parse(x));
    return out;
  }
};

int64_t as_int(const std::vector<Arg>& a, size_t k, int64_t def, const ArgReader& r) {
  if (k >= a.size() || a[k].kind == Arg::None) return def;
  if (a[k].kind != Arg::Int) r.fail("argument " + std::to_string(k) + " must be an integer");
  return a[k].i;
}
bool as_bool(const std::vector<Arg>& a, size_t k, bool def, const ArgReader& r) {
  if (k >= a.size()) return def;
  if (a[k].kind != Arg::Bool) r.fail("argument " + std::to_string(k) + " must be True or False");
  return a[k].b;
}
double as_double(const std::vector<Arg>& a, size_t k, double def, const ArgReader& r) {
  if (k >= a.size()) return def;
  if (a[k].kind == Arg::Float) return a[k].f;
  if (a[k].kind == Arg::Int) return static_cast<double>(a[k].i);
  r.fail("argument " + std::to_string(k) + " must be a number");
}

std::string list_str(const std::vector<Arg>& args) {
  Arg a;
  a.kind = Arg::List;
  a.list = args;
  return a.str();
}

// Wraps a module so the graph runner can call it on its inputs.
template <class Holder>
std::function<Tensor(const std::vector<Tensor>&)> single_input(Holder h) {
  auto p = h.ptr();
  return [p](const std::vector<Tensor>& in) { return p->forward(in[0]); };
}

int64_t count_params(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

void collect_leaves(const std::shared_ptr<torch::nn::Module>& m, std::unordered_set<const void*>& seen,
                    int64_t& count) {
  auto children = m->children();
  if (children.empty()) {
    if (seen.insert(m.get()).second) ++count;
    return;
  }
  for (const auto& c : children) collect_leaves(c, seen, count);
}

using Run = std::function<Tensor(const std::vector<Tensor>&)>;

// A built layer: its module (a Sequential of copies where the row repeats a plain module), how it
// runs, its output channels and its arguments as the layer table shows them.
struct BuiltLayer {
  std::shared_ptr<torch::nn::Module> module;
  Run run;
  int64_t c2 = 0;
  std::vector<Arg> shown;
};

// One module of a block row from its arguments a = [c1, c2, ...] (repeats inserted for C2f, C3,
// C3k2 and C2PSA), as the reference's parse_model passes them.
std::pair<std::shared_ptr<torch::nn::Module>, Run> block_module(const std::string& m, const std::vector<Arg>& a,
                                                                int64_t c1, int64_t c2, const ArgReader& reader) {
  if (m == "Conv" || m == "DWConv") {
    auto k = as_int(a, 2, 1, reader), s = as_int(a, 3, 1, reader);
    Conv c = m == "Conv" ? Conv(c1, c2, k, s, as_int(a, 5, 1, reader)) : DWConv(c1, c2, k, s);
    return {c.ptr(), single_input(c)};
  }
  if (m == "Bottleneck") {
    Bottleneck b(c1, c2, as_bool(a, 2, true, reader), as_int(a, 3, 1, reader), 3, 3, as_double(a, 5, 0.5, reader));
    return {b.ptr(), single_input(b)};
  }
  if (m == "SPPF") {
    // Rows of at most [c2, k] (YOLOv8/11) are the activated SPPF; longer rows (YOLO26) leave cv1
    // unactivated, as the reference's parse_model.
    SPPF s(c1, c2, as_int(a, 2, 5, reader), as_int(a, 3, 3, reader), as_bool(a, 4, false, reader),
           /*cv1_act=*/a.size() <= 3);
    return {s.ptr(), single_input(s)};
  }
  if (m == "C2f") {
    C2f c(c1, c2, as_int(a, 2, 1, reader), as_bool(a, 3, false, reader), as_int(a, 4, 1, reader),
          as_double(a, 5, 0.5, reader), InnerBlock::Bottleneck3x3);
    return {c.ptr(), single_input(c)};
  }
  if (m == "C3") {
    C3 c(c1, c2, as_int(a, 2, 1, reader), as_bool(a, 3, true, reader), as_int(a, 4, 1, reader),
         as_double(a, 5, 0.5, reader));
    return {c.ptr(), single_input(c)};
  }
  if (m == "C3k2") {  // [c1, c2, n, c3k, e, attn, g, shortcut]
    bool c3k = as_bool(a, 3, false, reader), attn = as_bool(a, 5, false, reader);
    auto inner = attn ? InnerBlock::BottleneckPSA : c3k ? InnerBlock::C3k : InnerBlock::Bottleneck;
    C2f c(c1, c2, as_int(a, 2, 1, reader), as_bool(a, 7, true, reader), as_int(a, 6, 1, reader),
          as_double(a, 4, 0.5, reader), inner);
    return {c.ptr(), single_input(c)};
  }
  C2PSA c(c1, c2, as_int(a, 2, 1, reader), as_double(a, 3, 0.5, reader));  // C2PSA
  return {c.ptr(), single_input(c)};
}

// A block row (Conv, DWConv, Bottleneck, SPPF, C2f, C3, C3k2, C2PSA) repeated n times (after the
// depth multiple), its size bounded before anything is allocated: planned_parameters accumulates
// the layers' bounds; a C3k2 marks the model as not legacy.
BuiltLayer build_block(const config::ModelSpec& spec, const std::string& m, const std::vector<Arg>& args, int64_t c1,
                       int n, const ArgReader& reader, bool& legacy, double& planned_parameters) {
  static const std::set<std::string> repeat{"C2f", "C3", "C3k2", "C2PSA"};
  if (args.empty() || args[0].kind != Arg::Int || args[0].i < 1)
    reader.fail("the first argument is the output channel count (a positive integer), e.g. [64, 3, 2]");
  BuiltLayer layer;
  const int64_t c2 = make_divisible(std::min<double>(as_int(args, 0, 0, reader), spec.max_channels) * spec.width, 8);
  layer.c2 = c2;
  if (c2 > kMaxChannels)
    reader.fail(std::to_string(c2) + " output channels (after width " + std::to_string(spec.width) +
                "); a layer may have at most " + std::to_string(kMaxChannels));
  std::vector<Arg> a{Arg::of(c1), Arg::of(c2)};
  a.insert(a.end(), args.begin() + 1, args.end());
  if (repeat.count(m)) {
    a.insert(a.begin() + 2, Arg::of(n));
    n = 1;
  }
  const int64_t kernel = m == "Conv" || m == "DWConv" ? as_int(a, 2, 1, reader) : 3;
  const int64_t inner = repeat.count(m) ? as_int(a, 2, 1, reader) : 1;
  // The hidden-channel ratio e, where each block takes it.
  const size_t e_at = m == "C3k2" ? 4 : m == "C2PSA" ? 3 : 5;
  const double e = m == "Conv" || m == "DWConv" || m == "SPPF" ? 1.0 : as_double(a, e_at, 0.5, reader);
  if (kernel < 1 || kernel > kMaxKernel) reader.fail("kernel size " + std::to_string(kernel) + " is not from 1 to 31");
  if (inner < 1 || inner > 1000) reader.fail("repeats " + std::to_string(inner) + " is not from 1 to 1000");
  if (!(e > 0 && e <= 4)) reader.fail("hidden-channel ratio " + std::to_string(e) + " is not above 0 and at most 4");
  planned_parameters += layer_parameter_bound(n, inner, c1, c2, e, kernel);
  if (planned_parameters > kMaxParameters)
    reader.fail("the model would hold more than " + std::to_string(static_cast<int64_t>(kMaxParameters)) +
                " parameters by this layer (channels " + std::to_string(c1) + " -> " + std::to_string(c2) + ", depth " +
                std::to_string(spec.depth) + ", width " + std::to_string(spec.width) +
                "); refused before anything is allocated");
  if (m == "C3k2") {
    legacy = false;
    if (spec.scale.size() == 1 && std::string("mlx").find(spec.scale) != std::string::npos) {
      while (a.size() < 4) a.push_back(Arg::of_bool(false));
      a[3] = Arg::of_bool(true);
    }
  }
  layer.shown = a;
  if (n <= 1) {
    std::tie(layer.module, layer.run) = block_module(m, a, c1, c2, reader);
    return layer;
  }
  // The reference wraps repeated plain modules in a Sequential.
  auto seq = std::make_shared<torch::nn::Module>();
  std::vector<Run> runs;
  for (int k = 0; k < n; ++k) {
    auto [mod, r] = block_module(m, a, c1, c2, reader);
    seq->register_module(std::to_string(k), mod);
    runs.push_back(r);
  }
  layer.module = seq;
  layer.run = [runs](const std::vector<Tensor>& in) {
    auto x = in[0];
    for (const auto& r : runs) x = r({x});
    return x;
  };
  return layer;
}

// The layer table's "from" column: an index, or a list of them.
std::string from_string(const std::vector<int>& from) {
  if (from.size() == 1) return std::to_string(from[0]);
  std::string s = "[";
  for (size_t k = 0; k < from.size(); ++k) s += (k ? ", " : "") + std::to_string(from[k]);
  return s + "]";
}

}  // namespace

SegmentationModelImpl::SegmentationModelImpl(const config::ModelSpec& spec) : spec_(spec) {
  layers_ = register_module("model", torch::nn::ModuleList());
  std::vector<int64_t> ch{3};
  bool legacy = true;
  const auto n_layers = static_cast<int>(spec_.layers.size());
  keep_.assign(n_layers, false);
  double planned_parameters = 0;  // the layers' bounds so far
  for (int i = 0; i < n_layers; ++i) {
    const auto& row = spec_.layers[i];
    ArgReader reader{spec_, row};
    auto args = reader.all();
    auto chan = [&](int f) -> int64_t {
      int idx = f < 0 ? static_cast<int>(ch.size()) + f : f;
      if (idx < 0 || idx >= static_cast<int>(ch.size()))
        reader.fail("'from' index " + std::to_string(f) + " out of range");
      return ch[idx];
    };
    for (int f : row.from) {
      int abs = f < 0 ? i + f : f;
      if (abs < 0 && !(i == 0 && f == -1)) reader.fail("'from' index " + std::to_string(f) + " out of range");
      if (abs >= i) reader.fail("'from' index " + std::to_string(f) + " must refer to an earlier layer");
      if (f != -1 && abs >= 0) keep_[abs] = true;
    }
    const int n =
        row.repeats > 1 ? static_cast<int>(std::max<int64_t>(py_round(row.repeats * spec_.depth), 1)) : row.repeats;
    const int n_print = n;
    const std::string& m = row.module;
    int64_t c2 = 0;
    std::shared_ptr<torch::nn::Module> module;
    Run run;
    std::vector<Arg> shown;

    static const std::set<std::string> blocks{"Conv", "DWConv", "Bottleneck", "SPPF", "C2f", "C3", "C3k2", "C2PSA"};
    if (blocks.count(m)) {
      if (row.from.size() != 1) reader.fail("takes one input");
      auto built = build_block(spec_, m, args, chan(row.from[0]), n, reader, legacy, planned_parameters);
      module = built.module;
      run = built.run;
      c2 = built.c2;
      shown = built.shown;
    } else if (m == "Concat") {
      c2 = 0;
      for (int f : row.from) c2 += chan(f);
      Concat c(as_int(args, 0, 1, reader));
      module = c.ptr();
      run = [p = c.ptr()](const std::vector<Tensor>& in) { return p->forward(in); };
      shown = args;
    } else if (m == "nn.Upsample") {
      c2 = chan(row.from[0]);
      if (args.size() > 2 && !(args[2].kind == Arg::Str && args[2].s == "nearest"))
        reader.fail("only nearest upsampling");
      Upsample u(as_double(args, 1, 2.0, reader));
      module = u.ptr();
      run = single_input(u);
      shown = args;
    } else if (m == "Segment" || m == "Segment26") {
      if (i != n_layers - 1) reader.fail("the segmentation head must be the last layer");
      if (row.from.size() != 3) reader.fail("takes three feature levels");
      SegmentHeadOptions o;
      o.nc = as_int(args, 0, spec_.nc, reader);
      o.nm = as_int(args, 1, 32, reader);
      if (o.nm < 1 || o.nm > 1024) reader.fail("mask coefficients " + std::to_string(o.nm) + " is not from 1 to 1024");
      o.npr = make_divisible(std::min<double>(as_int(args, 2, 256, reader), spec_.max_channels) * spec_.width, 8);
      if (o.npr > kMaxChannels)
        reader.fail(std::to_string(o.npr) + " prototype channels; at most " + std::to_string(kMaxChannels));
      o.reg_max = spec_.reg_max;
      o.end2end = spec_.end2end;
      o.legacy = legacy;
      o.proto26 = m == "Segment26";
      for (int f : row.from) o.ch.push_back(chan(f));
      planned_parameters += head_parameter_bound(o.ch, o.nc, o.nm, o.npr, o.reg_max);
      if (planned_parameters > kMaxParameters)
        reader.fail("the model would hold more than " + std::to_string(static_cast<int64_t>(kMaxParameters)) +
                    " parameters with this head (nc " + std::to_string(o.nc) +
                    "); refused before anything is allocated");
      head_ = SegmentHead(o);
      module = head_.ptr();
      head_from_ = row.from;
      shown = {Arg::of(o.nc), Arg::of(o.nm), Arg::of(o.npr), Arg::of(o.reg_max), Arg::of_bool(o.end2end)};
      Arg chl;
      chl.kind = Arg::List;
      for (auto c : o.ch) chl.list.push_back(Arg::of(c));
      shown.push_back(chl);
    } else {
      reader.fail(
          "unknown module (supported: Conv, DWConv, Bottleneck, C2f, C3, C3k2, SPPF, C2PSA, Concat, "
          "nn.Upsample, Segment, Segment26)");
    }
    layers_->push_back(module);
    if (run) nodes_.push_back({row.from, run});
    table_.push_back({i, from_string(row.from), n_print, count_params(*module), m, list_str(shown)});
    if (i == 0) ch.clear();
    ch.push_back(c2);
  }
  if (!head_) throw error_at(spec_.path, 0, "the model has no Segment or Segment26 head");
  for (int f : head_from_)
    if (f >= 0) keep_[f] = true;

  // Strides from a probe forward (as the reference does), then the head's bias initialisation.
  {
    torch::NoGradGuard no_grad;
    bool was_training = is_training();
    eval();
    auto feats = shared(torch::zeros({1, 3, 256, 256}));
    for (const auto& f : feats) strides_.push_back(256.0 / static_cast<double>(f.size(2)));
    train(was_training);
  }
  head_->bias_init(strides_);
}

std::vector<Tensor> SegmentationModelImpl::shared(const Tensor& x) {
  const size_t n = nodes_.size();
  std::vector<Tensor> saved(n + 1);
  Tensor prev = x;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < n; ++i) {
    inputs.clear();
    for (int f : nodes_[i].from) inputs.push_back(f == -1 ? prev : saved[f < 0 ? static_cast<int>(i) + f : f]);
    prev = nodes_[i].run(inputs);
    if (keep_[i]) saved[i] = prev;
  }
  std::vector<Tensor> feats;
  const int last = static_cast<int>(n);  // the head's index
  for (int f : head_from_) feats.push_back(with_grad_layout(f == -1 ? prev : saved[f < 0 ? last + f : f]));
  return feats;
}

HeadOutputs SegmentationModelImpl::heads(const std::vector<Tensor>& feats) { return head_->forward(feats); }

HeadOutputs SegmentationModelImpl::forward(const Tensor& x) {
  auto out = heads(shared(x));
  run_head_hooks(out);
  return out;
}

Tensor SegmentationModelImpl::decode(const HeadOutputs& out, int64_t max_det, bool agnostic) const {
  return head_->decode(out, strides_, max_det, agnostic);
}

int64_t SegmentationModelImpl::layer_count() const {
  // The reference counts distinct leaf modules (a shared SiLU once).
  std::unordered_set<const void*> seen;
  int64_t n = 0;
  for (const auto& c : children()) collect_leaves(c, seen, n);
  return n;
}

ModelSummary SegmentationModelImpl::summary(int64_t imgsz) {
  ModelSummary s{};
  for (const auto& p : parameters()) {
    s.parameters += p.numel();
    if (p.requires_grad()) s.gradients += p.numel();
  }
  s.layers = layer_count();
  // Counted as the reference does: one eval-mode forward and decode at imgsz x imgsz.
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  FlopScope scope;
  auto p = parameters().front();
  decode(forward(torch::zeros({1, 3, imgsz, imgsz}, p.options())));
  train(was_training);
  s.gflops = scope.multiply_adds() * 2.0 / 1e9;
  return s;
}

std::string format_layer_table(const SegmentationModelImpl& model) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "\n%3s%20s%3s%10s  %-45s%-30s\n", "", "from", "n", "params", "module", "arguments");
  o << line;
  for (const auto& r : model.layer_table()) {
    std::snprintf(line, sizeof line, "%3d%20s%3d%10lld  %-45s%-30s\n", r.index, r.from.c_str(), r.repeats,
                  static_cast<long long>(r.params), r.module.c_str(), r.args.c_str());
    o << line;
  }
  return o.str();
}

namespace {
std::string thousands(int64_t v) {
  auto s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}
}  // namespace

std::string format_summary(const SegmentationModelImpl& model, const ModelSummary& s) {
  std::string name = model.spec().name;
  if (name.rfind("yolo", 0) == 0) name = "YOLO" + name.substr(4);
  char g[32];
  std::snprintf(g, sizeof g, "%.1f", s.gflops);
  return name + " summary: " + thousands(s.layers) + " layers, " + thousands(s.parameters) + " parameters, " +
         thousands(s.gradients) + " gradients, " + g + " GFLOPs";
}

void use_channels_last(torch::nn::Module& module) {
  for (auto& p : module.parameters())
    if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
}

std::vector<std::pair<std::string, Tensor>> state_dict(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& p : module.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

}  // namespace lucid::model
