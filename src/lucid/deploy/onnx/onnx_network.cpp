#include "lucid/deploy/onnx/onnx_network.h"

#include <stdexcept>

#include "lucid/model/blocks.h"
#include "lucid/model/heads.h"

namespace lucid::engine::onnx {

namespace {

using model::Tensor;

// The child `key` of a module as a T; a module tree the writer does not know is a logic error.
template <class T>
const T& child(const torch::nn::Module& m, const std::string& key) {
  const auto* found = m.named_children().find(key);
  const T* typed = found ? (*found)->as<T>() : nullptr;
  if (!typed) throw std::logic_error("ONNX writer: " + m.name() + " has no child '" + key + "' of the expected kind");
  return *typed;
}

std::vector<int64_t> pair_of(const torch::ExpandingArray<2>& a) { return {a->at(0), a->at(1)}; }

// Emits lucid's modules one by one, each as the ONNX nodes of its forward.
class Writer {
 public:
  Writer(Graph& g, const model::SegmentationModelImpl& model) : g_(g), model_(model) {}

  Value module(const std::string& name, const torch::nn::Module& m, const Value& x);
  std::vector<Value> shared(const Value& images);
  Value branch(const std::string& key, const std::vector<Value>& feats, int64_t channels);
  Value prototypes(const std::vector<Value>& feats);

  Value silu(const Value& x) { return g_.op("Mul", {x, g_.op("Sigmoid", {x})}); }
  std::vector<Value> split(const Value& x, const std::vector<int64_t>& sizes, int64_t axis) {
    return g_.node("Split", {x, g_.ints(sizes)}, static_cast<int>(sizes.size()), {{"axis", axis}});
  }
  Value concat(const std::vector<Value>& xs, int64_t axis) { return g_.op("Concat", xs, {{"axis", axis}}); }
  Value reshape(const Value& x, const std::vector<int64_t>& shape) { return g_.op("Reshape", {x, g_.ints(shape)}); }
  Value transpose(const Value& x, const std::vector<int64_t>& perm) {
    return g_.op("Transpose", {x}, {{"perm", perm}});
  }
  Value unsqueeze(const Value& x, int64_t axis) { return g_.op("Unsqueeze", {x, g_.ints({axis})}); }

 private:
  Value conv2d(const std::string& name, const torch::nn::Conv2dImpl& conv, const torch::nn::BatchNorm2dImpl* bn,
               const Value& x);
  Value conv_block(const std::string& name, const model::ConvImpl& m, const Value& x);
  Value chain(const std::string& name, const torch::nn::Module& m, const Value& x);
  Value c2f(const std::string& name, const model::C2fImpl& m, const Value& x);
  Value sppf(const std::string& name, const model::SPPFImpl& m, const Value& x);
  Value attention(const std::string& name, const model::AttentionImpl& m, const Value& x);
  Value upsample(const Value& x, double scale);
  Value proto_base(const std::string& name, const model::ProtoImpl& m, const Value& x);

  Graph& g_;
  const model::SegmentationModelImpl& model_;
};

// conv(x) with its BatchNorm (if any) folded: kernel w * s and bias (b - mean) * s + beta, s =
// gamma / sqrt(var + eps), computed in FP64.
Value Writer::conv2d(const std::string& name, const torch::nn::Conv2dImpl& conv, const torch::nn::BatchNorm2dImpl* bn,
                     const Value& x) {
  const auto& o = conv.options;
  auto w = conv.weight.detach().to(torch::kCPU, torch::kFloat64);
  auto b = conv.bias.defined() ? conv.bias.detach().to(torch::kCPU, torch::kFloat64)
                               : torch::zeros({w.size(0)}, w.options());
  if (bn) {
    auto scale = bn->weight.detach().to(torch::kCPU, torch::kFloat64) /
                 (bn->running_var.detach().to(torch::kCPU, torch::kFloat64) + bn->options.eps()).sqrt();
    w = w * scale.view({-1, 1, 1, 1});
    b = (b - bn->running_mean.detach().to(torch::kCPU, torch::kFloat64)) * scale +
        bn->bias.detach().to(torch::kCPU, torch::kFloat64);
  }
  const auto padding = pair_of(std::get<torch::ExpandingArray<2>>(o.padding()));
  return g_.op("Conv", {x, g_.initializer(name + ".weight", w), g_.initializer(name + ".bias", b)},
               {{"kernel_shape", pair_of(o.kernel_size())},
                {"strides", pair_of(o.stride())},
                {"pads", std::vector<int64_t>{padding[0], padding[1], padding[0], padding[1]}},
                {"dilations", pair_of(o.dilation())},
                {"group", o.groups()}});
}

Value Writer::conv_block(const std::string& name, const model::ConvImpl& m, const Value& x) {
  auto y = conv2d(name + ".conv", *m.conv, m.bn.get(), x);
  const auto* act = m.named_children().find("act");
  return act && (*act)->as<torch::nn::SiLUImpl>() ? silu(y) : y;
}

// Children "0", "1", ... in turn (a Chain, a ModuleList of blocks).
Value Writer::chain(const std::string& name, const torch::nn::Module& m, const Value& x) {
  Value y = x;
  for (const auto& item : m.named_children()) y = module(name + "." + item.key(), *item.value(), y);
  return y;
}

Value Writer::c2f(const std::string& name, const model::C2fImpl& m, const Value& x) {
  const auto& cv1 = child<model::ConvImpl>(m, "cv1");
  const int64_t c = cv1.conv->options.out_channels() / 2;
  auto halves = split(conv_block(name + ".cv1", cv1, x), {c, c}, 1);
  std::vector<Value> parts(halves.begin(), halves.end());
  for (const auto& item : child<torch::nn::ModuleListImpl>(m, "m").named_children())
    parts.push_back(module(name + ".m." + item.key(), *item.value(), parts.back()));
  return conv_block(name + ".cv2", child<model::ConvImpl>(m, "cv2"), concat(parts, 1));
}

Value Writer::sppf(const std::string& name, const model::SPPFImpl& m, const Value& x) {
  const auto& pool = child<torch::nn::MaxPool2dImpl>(m, "m").options;
  const auto k = pair_of(pool.kernel_size());
  const auto p = pair_of(pool.padding());
  std::vector<Value> ys{conv_block(name + ".cv1", child<model::ConvImpl>(m, "cv1"), x)};
  for (int64_t i = 0; i < m.pools(); ++i)
    ys.push_back(g_.op("MaxPool", {ys.back()},
                       {{"kernel_shape", k},
                        {"strides", pair_of(pool.stride())},
                        {"pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]}}}));
  auto out = conv_block(name + ".cv2", child<model::ConvImpl>(m, "cv2"), concat(ys, 1));
  return m.adds() ? g_.op("Add", {out, x}) : out;
}

// Multi-head attention over the H x W positions (AttentionImpl::forward); B, H and W come from the
// input's shape, so the graph takes any size.
Value Writer::attention(const std::string& name, const model::AttentionImpl& m, const Value& x) {
  const int64_t nh = m.heads(), kd = m.key_dim(), hd = m.head_dim();
  auto qkv = reshape(conv_block(name + ".qkv", child<model::ConvImpl>(m, "qkv"), x), {0, nh, 2 * kd + hd, -1});
  auto qkv_parts = split(qkv, {kd, kd, hd}, 2);
  const auto &q = qkv_parts[0], &k = qkv_parts[1], &v = qkv_parts[2];
  auto scores = g_.op("MatMul", {transpose(g_.op("Mul", {q, g_.scalar(m.scale())}), {0, 1, 3, 2}), k});
  auto attn = g_.op("Softmax", {scores}, {{"axis", int64_t{-1}}});
  auto shape = g_.op("Shape", {x});
  auto y = g_.op("Reshape", {g_.op("MatMul", {v, transpose(attn, {0, 1, 3, 2})}), shape});
  auto pe = conv_block(name + ".pe", child<model::ConvImpl>(m, "pe"), g_.op("Reshape", {v, shape}));
  return conv_block(name + ".proj", child<model::ConvImpl>(m, "proj"), g_.op("Add", {y, pe}));
}

// Nearest-neighbour upsampling as torch's interpolate computes it (floor of the scaled index).
Value Writer::upsample(const Value& x, double scale) {
  auto scales =
      g_.constant(torch::tensor({1.0f, 1.0f, static_cast<float>(scale), static_cast<float>(scale)}), /*fp32=*/true);
  return g_.op("Resize", {x, "", scales},
               {{"mode", std::string("nearest")},
                {"coordinate_transformation_mode", std::string("asymmetric")},
                {"nearest_mode", std::string("floor")}});
}

Value Writer::module(const std::string& name, const torch::nn::Module& m, const Value& x) {
  if (const auto* c = m.as<model::ConvImpl>()) return conv_block(name, *c, x);
  if (const auto* c = m.as<torch::nn::Conv2dImpl>()) return conv2d(name, *c, nullptr, x);
  if (m.as<model::ChainImpl>()) return chain(name, m, x);
  if (const auto* b = m.as<model::BottleneckImpl>()) {
    auto y = conv_block(name + ".cv2", child<model::ConvImpl>(*b, "cv2"),
                        conv_block(name + ".cv1", child<model::ConvImpl>(*b, "cv1"), x));
    return b->adds() ? g_.op("Add", {x, y}) : y;
  }
  if (const auto* c = m.as<model::C3Impl>()) {
    auto a = chain(name + ".m", child<model::ChainImpl>(*c, "m"),
                   conv_block(name + ".cv1", child<model::ConvImpl>(*c, "cv1"), x));
    auto b = conv_block(name + ".cv2", child<model::ConvImpl>(*c, "cv2"), x);
    return conv_block(name + ".cv3", child<model::ConvImpl>(*c, "cv3"), concat({a, b}, 1));
  }
  if (const auto* c = m.as<model::C2fImpl>()) return c2f(name, *c, x);
  if (const auto* s = m.as<model::SPPFImpl>()) return sppf(name, *s, x);
  if (const auto* c = m.as<model::C2PSAImpl>()) {
    const auto& cv1 = child<model::ConvImpl>(*c, "cv1");
    const int64_t half = cv1.conv->options.out_channels() / 2;
    auto ab = split(conv_block(name + ".cv1", cv1, x), {half, half}, 1);
    auto b = chain(name + ".m", child<model::ChainImpl>(*c, "m"), ab[1]);
    return conv_block(name + ".cv2", child<model::ConvImpl>(*c, "cv2"), concat({ab[0], b}, 1));
  }
  if (const auto* p = m.as<model::PSABlockImpl>()) {
    auto a = attention(name + ".attn", child<model::AttentionImpl>(*p, "attn"), x);
    auto y = p->adds() ? g_.op("Add", {x, a}) : a;
    auto f = chain(name + ".ffn", child<model::ChainImpl>(*p, "ffn"), y);
    return p->adds() ? g_.op("Add", {y, f}) : f;
  }
  if (const auto* u = m.as<model::UpsampleImpl>()) return upsample(x, u->scale());
  throw std::logic_error("ONNX writer: no ONNX form for module " + m.name() + " (" + name + ")");
}

// The backbone and neck (SegmentationModelImpl::shared): the features the head reads.
std::vector<Value> Writer::shared(const Value& images) {
  const size_t n = model_.layer_modules();
  std::vector<Value> saved(n);
  Value prev = images;
  auto at = [&](int f, size_t i) {
    return f == -1 ? prev : saved[static_cast<size_t>(f < 0 ? static_cast<int>(i) + f : f)];
  };
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> inputs;
    for (int f : model_.layer_inputs(i)) inputs.push_back(at(f, i));
    const auto layer = model_.layer(i);
    const auto name = "model." + std::to_string(i);
    if (const auto* c = layer->as<model::ConcatImpl>())
      prev = concat(inputs, c->dim());
    else
      prev = module(name, *layer, inputs.at(0));
    saved[i] = prev;
  }
  std::vector<Value> feats;
  for (int f : model_.head_inputs()) feats.push_back(at(f, n));
  return feats;
}

// One prediction of the head over every level, (B, channels, A) (SegmentHeadImpl::run_levels).
Value Writer::branch(const std::string& key, const std::vector<Value>& feats, int64_t channels) {
  const auto& levels = child<torch::nn::ModuleListImpl>(*model_.head(), key);
  const std::string name = "model." + std::to_string(model_.layer_modules()) + "." + key;
  std::vector<Value> parts;
  for (size_t i = 0; i < feats.size(); ++i)
    parts.push_back(reshape(chain(name + "." + std::to_string(i), *levels[i], feats[i]), {0, channels, -1}));
  return concat(parts, 2);
}

Value Writer::proto_base(const std::string& name, const model::ProtoImpl& m, const Value& x) {
  auto h = conv_block(name + ".cv1", child<model::ConvImpl>(m, "cv1"), x);
  const auto& up = child<torch::nn::ConvTranspose2dImpl>(m, "upsample");
  const auto pads = pair_of(std::get<torch::ExpandingArray<2>>(up.options.padding()));
  auto u =
      g_.op("ConvTranspose",
            {h, g_.initializer(name + ".upsample.weight", up.weight), g_.initializer(name + ".upsample.bias", up.bias)},
            {{"kernel_shape", pair_of(up.options.kernel_size())},
             {"strides", pair_of(up.options.stride())},
             {"pads", std::vector<int64_t>{pads[0], pads[1], pads[0], pads[1]}}});
  return conv_block(name + ".cv3", child<model::ConvImpl>(m, "cv3"),
                    conv_block(name + ".cv2", child<model::ConvImpl>(m, "cv2"), u));
}

// The mask prototypes: Proto on P3, or Proto26's P4 and P5 refined, upsampled and added onto P3 first.
Value Writer::prototypes(const std::vector<Value>& feats) {
  const std::string name = "model." + std::to_string(model_.layer_modules()) + ".proto";
  const auto& head = *model_.head();
  if (const auto* p26 = child<torch::nn::Module>(head, "proto").as<model::Proto26Impl>()) {
    Value feat = feats[0];
    const auto& refine = child<torch::nn::ModuleListImpl>(*p26, "feat_refine");
    for (size_t i = 0; i < refine.size(); ++i) {
      auto r = module(name + ".feat_refine." + std::to_string(i), *refine[i], feats[i + 1]);
      feat = g_.op("Add", {feat, upsample(r, static_cast<double>(int64_t{1} << (i + 1)))});
    }
    return proto_base(name, *p26, conv_block(name + ".feat_fuse", child<model::ConvImpl>(*p26, "feat_fuse"), feat));
  }
  return proto_base(name, child<model::ProtoImpl>(head, "proto"), feats[0]);
}

// Anchor centres (1, 2, A) and strides (1, A) of the features: constants for a fixed input, else
// computed from each feature's shape (make_anchors in the graph).
std::pair<Value, Value> anchors(Writer& w, Graph& g, const model::SegmentationModelImpl& model,
                                const std::vector<Value>& feats, const NetworkLayout& layout) {
  const auto& strides = model.strides();
  if (!layout.dynamic) {
    std::vector<Tensor> shapes;
    for (double s : strides)
      shapes.push_back(
          torch::empty({1, 1, layout.height / static_cast<int64_t>(s), layout.width / static_cast<int64_t>(s)}));
    auto [points, stride] = model::make_anchors(shapes, strides, 0.5);
    return {g.constant(points.transpose(0, 1).unsqueeze(0)), g.constant(stride.transpose(0, 1))};
  }
  std::vector<Value> points, level_strides;
  auto zero = g.constant(torch::tensor(int64_t{0})), one = g.constant(torch::tensor(int64_t{1}));
  for (size_t i = 0; i < feats.size(); ++i) {
    auto shape = g.op("Shape", {feats[i]});
    auto h = g.op("Gather", {shape, g.constant(torch::tensor(int64_t{2}))});
    auto wd = g.op("Gather", {shape, g.constant(torch::tensor(int64_t{3}))});
    auto centres = [&](const Value& n) {
      return g.op("Add", {g.op("Cast", {g.op("Range", {zero, n, one})}, {{"to", g.float_type()}}), g.scalar(0.5)});
    };
    auto hw = w.concat({w.unsqueeze(h, 0), w.unsqueeze(wd, 0)}, 0);
    auto gx = g.op("Expand", {w.unsqueeze(centres(wd), 0), hw});
    auto gy = g.op("Expand", {w.unsqueeze(centres(h), 1), hw});
    points.push_back(w.concat({w.reshape(gx, {1, -1}), w.reshape(gy, {1, -1})}, 0));
    auto count = w.concat({g.ints({1}), w.unsqueeze(g.op("Mul", {h, wd}), 0)}, 0);
    level_strides.push_back(g.op("Expand", {g.constant(torch::full({1, 1}, strides[i])), count}));
  }
  return {w.unsqueeze(w.concat(points, 1), 0), w.concat(level_strides, 1)};
}

// SegmentHeadImpl::decode_dense of one branch, and for the one-to-many head of an end-to-end model
// the centre form taken from its corners after the stride (postprocess.cpp's one_to_many_dense).
Value dense(Writer& w, Graph& g, const model::SegmentationModelImpl& model, const std::string& prefix,
            const std::vector<Value>& feats, std::pair<Value, Value> grid) {
  const auto& o = model.head()->options();
  auto boxes = w.branch(prefix + "cv2", feats, 4 * o.reg_max);
  auto scores = w.branch(prefix + "cv3", feats, o.nc);
  auto coefs = w.branch(prefix + "cv4", feats, o.nm);
  auto dist = boxes;
  if (o.reg_max > 1) {  // DFL: softmax over the bins, then their expectation (a 1x1 conv of 0..reg_max-1)
    auto bins = w.transpose(w.reshape(boxes, {0, 4, o.reg_max, -1}), {0, 2, 1, 3});
    auto p = g.op("Softmax", {bins}, {{"axis", int64_t{1}}});
    auto weight = g.constant(torch::arange(o.reg_max, torch::kFloat32).view({1, o.reg_max, 1, 1}));
    dist = w.reshape(g.op("Conv", {p, weight}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}), {0, 4, -1});
  }
  auto lt_rb = w.split(dist, {2, 2}, 1);
  auto x1y1 = g.op("Sub", {grid.first, lt_rb[0]}), x2y2 = g.op("Add", {grid.first, lt_rb[1]});
  Value box;
  if (!o.end2end) {
    auto centre = g.op("Div", {g.op("Add", {x1y1, x2y2}), g.scalar(2)});
    box = g.op("Mul", {w.concat({centre, g.op("Sub", {x2y2, x1y1})}, 1), grid.second});
  } else {
    auto corners = w.split(g.op("Mul", {w.concat({x1y1, x2y2}, 1), grid.second}), {2, 2}, 1);
    box = prefix.empty() ? w.concat({g.op("Div", {g.op("Add", {corners[0], corners[1]}), g.scalar(2)}),
                                     g.op("Sub", {corners[1], corners[0]})},
                                    1)
                         : w.concat({corners[0], corners[1]}, 1);
  }
  return w.concat({box, g.op("Sigmoid", {scores}), coefs}, 1);
}

// The last axis's maximum, (B, A) or (B, A, 1) from (B, A, C): ReduceMax takes its axes as an input
// from opset 18.
Value max_last(Graph& g, const Value& x, bool keepdims = false) {
  const Attribute keep{"keepdims", int64_t{keepdims}};
  if (g.opset() >= 18) return g.op("ReduceMax", {x, g.ints({-1})}, {keep});
  return g.op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{-1}}, keep});
}

// SegmentHeadImpl::decode's top-k of the one-to-one head (not agnostic): (B, k, 6 + nm).
Value top_k(Writer& w, Graph& g, const Value& y, int64_t nc, int64_t nm, int64_t k) {
  auto parts = w.split(w.transpose(y, {0, 2, 1}), {4, nc, nm}, -1);
  const auto &boxes = parts[0], &scores = parts[1], &coefs = parts[2];
  auto kk = g.ints({k});
  auto ori = w.unsqueeze(g.node("TopK", {max_last(g, scores), kk}, 2, {{"axis", int64_t{1}}})[1], -1);
  auto gathered = g.op("GatherElements", {scores, g.op("Expand", {ori, g.ints({1, 1, nc})})}, {{"axis", int64_t{1}}});
  auto top = g.node("TopK", {w.reshape(gathered, {0, -1}), kk}, 2, {{"axis", int64_t{1}}});
  auto nc_value = g.constant(torch::tensor(nc));
  auto labels = g.op("Cast", {w.unsqueeze(g.op("Mod", {top[1], nc_value}), -1)}, {{"to", g.float_type()}});
  auto idx = g.op("GatherElements", {ori, w.unsqueeze(g.op("Div", {top[1], nc_value}), -1)}, {{"axis", int64_t{1}}});
  auto take = [&](const Value& v, int64_t n) {
    return g.op("GatherElements", {v, g.op("Expand", {idx, g.ints({1, 1, n})})}, {{"axis", int64_t{1}}});
  };
  return w.concat({take(boxes, 4), w.unsqueeze(top[0], -1), labels, take(coefs, nm)}, -1);
}

// Class-aware NMS over the dense output (non_max_suppression in inference/postprocess.h, one label
// per anchor): per image the kept rows x1 y1 x2 y2 score class coef... by descending score, at most
// max_det, scattered into zero rows (B, max_det, 6 + nm).
Value nms_inside(Writer& w, Graph& g, const Value& images, const Value& y, int64_t nc, int64_t nm,
                 const NetworkLayout& layout) {
  constexpr double kClassOffset = 7680;  // boxes of different classes never overlap (NmsOptions::max_wh)
  auto parts = w.split(w.transpose(y, {0, 2, 1}), {4, nc, nm}, -1);
  auto xy_wh = w.split(parts[0], {2, 2}, -1);
  auto half_wh = g.op("Div", {xy_wh[1], g.scalar(2)});
  auto box = w.concat({g.op("Sub", {xy_wh[0], half_wh}), g.op("Add", {xy_wh[0], half_wh})}, -1);
  auto score = max_last(g, parts[1], /*keepdims=*/true);
  auto cls = g.op("Cast", {g.op("ArgMax", {parts[1]}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{1}}})},
                  {{"to", g.float_type()}});
  auto table = w.concat({box, score, cls, parts[2]}, -1);  // (B, A, 6 + nm)
  auto shifted = g.op("Add", {box, g.op("Mul", {cls, g.scalar(kClassOffset)})});
  const Attribute fp32{"to", int64_t{1}};  // NonMaxSuppression takes FP32 only
  auto selected = g.op("NonMaxSuppression",
                       {g.op("Cast", {shifted}, {fp32}), g.op("Cast", {w.transpose(score, {0, 2, 1})}, {fp32}),
                        g.ints({layout.max_det}), g.constant(torch::tensor({static_cast<float>(layout.iou)}), true),
                        g.constant(torch::tensor({static_cast<float>(layout.conf)}), true)});
  auto b = g.op("Slice", {selected, g.ints({0}), g.ints({1}), g.ints({1})});  // (K, 1) image
  auto n = g.op("Slice", {selected, g.ints({2}), g.ints({3}), g.ints({1})});  // (K, 1) anchor
  auto rows = g.op("GatherND", {table, w.concat({b, n}, 1)});                 // (K, 6 + nm)
  // Each kept row's place among its image's rows: they come image by image, by descending score.
  auto batch = g.op("Gather", {g.op("Shape", {images}), g.constant(torch::tensor(int64_t{0}))});
  auto images_range =
      w.unsqueeze(g.op("Range", {g.constant(torch::tensor(int64_t{0})), batch, g.constant(torch::tensor(int64_t{1}))}),
                  0);                                                                  // (1, B)
  auto same = g.op("Cast", {g.op("Equal", {b, images_range})}, {{"to", int64_t{7}}});  // (K, B) int64
  auto rank = g.op("GatherElements", {g.op("CumSum", {same, g.constant(torch::tensor(int64_t{0}))}), b},
                   {{"axis", int64_t{1}}});
  auto place = w.concat({b, g.op("Sub", {rank, g.ints({1})})}, 1);  // (K, 2)
  auto shape = w.concat({w.unsqueeze(batch, 0), g.ints({layout.max_det, 6 + nm})}, 0);
  auto zeros = g.op("Expand", {g.scalar(0), shape});
  return g.op("ScatterND", {zeros, place, rows});
}

}  // namespace

int64_t anchor_count(const model::SegmentationModelImpl& model, int64_t height, int64_t width) {
  int64_t a = 0;
  for (double s : model.strides()) a += (height / static_cast<int64_t>(s)) * (width / static_cast<int64_t>(s));
  return a;
}

void write_network(Graph& g, const model::SegmentationModelImpl& model, const NetworkLayout& layout) {
  const auto& o = model.head()->options();
  const Dim batch = layout.dynamic ? Dim{std::string("batch")} : Dim{layout.batch};
  const Dim height = layout.dynamic ? Dim{std::string("height")} : Dim{layout.height};
  const Dim width = layout.dynamic ? Dim{std::string("width")} : Dim{layout.width};
  Writer w(g, model);
  auto images = g.input("images", {batch, int64_t{3}, height, width});
  auto feats = w.shared(images);
  auto grid = anchors(w, g, model, feats, layout);
  const int64_t a = anchor_count(model, layout.height, layout.width);
  if (layout.one_to_one) {
    if (!o.end2end) throw std::logic_error("ONNX writer: a one-to-one head asked of a model without one");
    const int64_t k = std::min(layout.max_det, a);
    g.output("output0", top_k(w, g, dense(w, g, model, "one2one_", feats, grid), o.nc, o.nm, k), {batch, k, 6 + o.nm});
  } else if (layout.nms) {
    g.output("output0", nms_inside(w, g, images, dense(w, g, model, "", feats, grid), o.nc, o.nm, layout),
             {batch, layout.max_det, 6 + o.nm});
  } else {
    g.output("output0", dense(w, g, model, "", feats, grid),
             {batch, 4 + o.nc + o.nm, layout.dynamic ? Dim{std::string("anchors")} : Dim{a}});
  }
  const Dim mh = layout.dynamic ? Dim{std::string("mask_height")} : Dim{layout.height / 4};
  const Dim mw = layout.dynamic ? Dim{std::string("mask_width")} : Dim{layout.width / 4};
  g.output("output1", w.prototypes(feats), {batch, o.nm, mh, mw});
}

}  // namespace lucid::engine::onnx
