#include "lucid/model/heads.h"

#include <cmath>

namespace lucid::model {

namespace {

torch::nn::Conv2d plain_conv(int64_t c1, int64_t c2) { return torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, 1)); }

torch::nn::Conv2dImpl& last_conv(const Chain& chain) {
  auto children = chain->children();
  return *children.back()->as<torch::nn::Conv2dImpl>();
}

}  // namespace

void SegmentHeadImpl::make_branch(const std::string& prefix, Branch& box, Branch& cls, Branch& mask) {
  const auto& o = options_;
  int64_t c2 = std::max({int64_t{16}, o.ch[0] / 4, o.reg_max * 4});
  int64_t c3 = std::max(o.ch[0], std::min(o.nc, int64_t{100}));
  int64_t c4 = std::max(o.ch[0] / 4, o.nm);
  // Mask-coefficient chains are registered later (after proto), as in the reference.
  // A copied branch (one2one_) has one SiLU per copied list, as deep copies in the reference do.
  const bool copy = !prefix.empty();
  auto box_list = register_module(prefix + "cv2", torch::nn::ModuleList());
  auto cls_list = register_module(prefix + "cv3", torch::nn::ModuleList());
  {
    std::optional<SiluScope> scope;
    if (copy) scope.emplace();
    for (auto x : o.ch) {
      Chain b;
      b->add(Conv(x, c2, 3));
      b->add(Conv(c2, c2, 3));
      b->add(plain_conv(c2, 4 * o.reg_max));
      box.push_back(b);
      box_list->push_back(b);
    }
  }
  std::optional<SiluScope> cls_scope;
  if (copy) cls_scope.emplace();
  for (auto x : o.ch) {
    Chain c;
    if (o.legacy) {
      c->add(Conv(x, c3, 3));
      c->add(Conv(c3, c3, 3));
    } else {
      Chain s1, s2;
      s1->add(DWConv(x, x, 3));
      s1->add(Conv(x, c3, 1));
      s2->add(DWConv(c3, c3, 3));
      s2->add(Conv(c3, c3, 1));
      c->add(s1);
      c->add(s2);
    }
    c->add(plain_conv(c3, o.nc));
    cls.push_back(c);
    cls_list->push_back(c);
  }
  cls_scope.reset();
  std::optional<SiluScope> mask_scope;
  if (copy) mask_scope.emplace();
  for (auto x : o.ch) {
    Chain m;
    m->add(Conv(x, c4, 3));
    m->add(Conv(c4, c4, 3));
    m->add(plain_conv(c4, o.nm));
    mask.push_back(m);
  }
}

SegmentHeadImpl::SegmentHeadImpl(const SegmentHeadOptions& options) : options_(options) {
  TORCH_CHECK(options_.ch.size() == 3, "segmentation heads take three feature levels");
  // Registration order follows the reference (cv2, cv3, dfl, one2one_cv2, one2one_cv3, proto, cv4,
  // one2one_cv4) so parameter walks visit tensors in the same order.
  make_branch("", cv2_, cv3_, cv4_);
  if (options_.reg_max > 1)
    dfl_ = register_module("dfl", DFL(options_.reg_max));
  else
    register_module("dfl", torch::nn::Identity());
  if (options_.end2end) make_branch("one2one_", o2o_cv2_, o2o_cv3_, o2o_cv4_);
  if (options_.proto26)
    proto26_ = register_module("proto", Proto26(options_.ch, options_.npr, options_.nm, options_.nc));
  else
    proto_ = register_module("proto", Proto(options_.ch[0], options_.npr, options_.nm));
  auto cv4_list = register_module("cv4", torch::nn::ModuleList());
  for (auto& m : cv4_) cv4_list->push_back(m);
  if (options_.end2end) {
    auto list = register_module("one2one_cv4", torch::nn::ModuleList());
    for (auto& m : o2o_cv4_) list->push_back(m);
    // The one-to-one branch starts as an exact copy of the one-to-many branch.
    torch::NoGradGuard no_grad;
    auto copy = [](const Branch& from, const Branch& to) {
      for (size_t i = 0; i < from.size(); ++i) {
        auto src = from[i]->named_parameters();
        auto dst = to[i]->named_parameters();
        for (auto& kv : src) dst[kv.key()].copy_(kv.value());
        auto srcb = from[i]->named_buffers();
        auto dstb = to[i]->named_buffers();
        for (auto& kv : srcb) dstb[kv.key()].copy_(kv.value());
      }
    };
    copy(cv2_, o2o_cv2_);
    copy(cv3_, o2o_cv3_);
    copy(cv4_, o2o_cv4_);
  }
}

Tensor SegmentHeadImpl::run_levels(const std::vector<Tensor>& x, const Branch& convs, int64_t channels) {
  const auto bs = x[0].size(0);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < x.size(); ++i) parts.push_back(convs[i].ptr()->forward(x[i]).view({bs, channels, -1}));
  return torch::cat(parts, -1);
}

std::string SegmentHeadImpl::prediction_name(int64_t k) const {
  static const char* const names[] = {
      "boxes", "scores", "mask coefficients", "one-to-one boxes", "one-to-one scores", "one-to-one mask coefficients"};
  return k == prediction_count() - 1 ? "prototypes" : names[k];
}

std::vector<Tensor> SegmentHeadImpl::prediction_parameters(int64_t k) const {
  const Branch* branches[] = {&cv2_, &cv3_, &cv4_, &o2o_cv2_, &o2o_cv3_, &o2o_cv4_};
  if (k == prediction_count() - 1) return options_.proto26 ? proto26_->parameters() : proto_->parameters();
  std::vector<Tensor> params;
  for (const auto& chain : *branches[k])
    for (auto& p : chain->parameters()) params.push_back(p);
  return params;
}

std::vector<Tensor> SegmentHeadImpl::predict(int64_t k, const std::vector<Tensor>& feats) {
  auto out = predict_raw(k, feats);
  for (auto& t : out) t = with_grad_layout(t);
  return out;
}

std::vector<Tensor> SegmentHeadImpl::predict_raw(int64_t k, const std::vector<Tensor>& feats) {
  const auto& o = options_;
  switch (k == prediction_count() - 1 ? 6 : k) {
    case 0:
      return {run_levels(feats, cv2_, 4 * o.reg_max)};
    case 1:
      return {run_levels(feats, cv3_, o.nc)};
    case 2:
      return {run_levels(feats, cv4_, o.nm)};
    case 3:
      return {run_levels(feats, o2o_cv2_, 4 * o.reg_max)};
    case 4:
      return {run_levels(feats, o2o_cv3_, o.nc)};
    case 5:
      return {run_levels(feats, o2o_cv4_, o.nm)};
    default:
      break;
  }
  if (!o.proto26) return {proto_->forward(feats[0])};
  auto [p, semantic] = proto26_->forward_multi(feats, is_training());
  if (!semantic.defined()) return {p};
  return {p, semantic};
}

HeadOutputs SegmentHeadImpl::compose(const std::vector<Tensor>& feats,
                                     const std::vector<std::vector<Tensor>>& predictions) const {
  HeadOutputs out;
  out.feats = feats;
  out.one2many.boxes = predictions[0][0];
  out.one2many.scores = predictions[1][0];
  out.one2many.mask_coefficient = predictions[2][0];
  if (options_.end2end) {
    out.one2one = BranchOutputs{};
    out.one2one->boxes = predictions[3][0];
    out.one2one->scores = predictions[4][0];
    out.one2one->mask_coefficient = predictions[5][0];
  }
  const auto& proto = predictions.back();
  out.one2many.proto = proto[0];
  if (proto.size() > 1) out.one2many.semantic = proto[1];
  if (out.one2one) {
    out.one2one->proto = out.one2many.proto.detach();
    if (out.one2many.semantic.defined()) out.one2one->semantic = out.one2many.semantic.detach();
  }
  return out;
}

HeadOutputs SegmentHeadImpl::forward(const std::vector<Tensor>& feats) {
  std::vector<std::vector<Tensor>> predictions;
  std::vector<Tensor> detached;
  for (int64_t k = 0; k < prediction_count(); ++k) {
    if (prediction_detached(k) && is_training()) {
      if (detached.empty())
        for (const auto& f : feats) detached.push_back(f.detach());
      predictions.push_back(predict(k, detached));
    } else {
      predictions.push_back(predict(k, feats));
    }
  }
  return compose(feats, predictions);
}

void SegmentHeadImpl::bias_init(const std::vector<double>& strides) {
  torch::NoGradGuard no_grad;
  auto init = [&](const Branch& box, const Branch& cls) {
    for (size_t i = 0; i < box.size(); ++i) {
      last_conv(box[i]).bias.fill_(2.0);
      last_conv(cls[i]).bias.fill_(std::log(5.0 / options_.nc / std::pow(640.0 / strides[i], 2)));
    }
  };
  init(cv2_, cv3_);
  if (options_.end2end) init(o2o_cv2_, o2o_cv3_);
}

std::pair<Tensor, Tensor> make_anchors(const std::vector<Tensor>& feats, const std::vector<double>& strides,
                                       double offset) {
  std::vector<Tensor> points, stride_list;
  for (size_t i = 0; i < feats.size(); ++i) {
    auto h = feats[i].size(2), w = feats[i].size(3);
    auto opts = torch::TensorOptions().dtype(feats[i].scalar_type()).device(feats[i].device());
    auto sx = torch::arange(w, opts) + offset;
    auto sy = torch::arange(h, opts) + offset;
    auto grid = torch::meshgrid({sy, sx}, "ij");
    points.push_back(torch::stack({grid[1], grid[0]}, -1).view({-1, 2}));
    stride_list.push_back(torch::full({h * w, 1}, strides[i], opts));
  }
  return {torch::cat(points), torch::cat(stride_list)};
}

Tensor dist2bbox(const Tensor& distance, const Tensor& anchor_points, bool xywh, int64_t dim) {
  auto lt_rb = distance.chunk(2, dim);
  auto x1y1 = anchor_points - lt_rb[0];
  auto x2y2 = anchor_points + lt_rb[1];
  if (xywh) return torch::cat({(x1y1 + x2y2) / 2, x2y2 - x1y1}, dim);
  return torch::cat({x1y1, x2y2}, dim);
}

Tensor SegmentHeadImpl::decode_dense(const HeadOutputs& out, const std::vector<double>& strides) const {
  const auto& br = out.primary();
  auto [anchors, stride_t] = make_anchors(out.feats, strides, 0.5);
  auto dist = options_.reg_max > 1 ? dfl_.ptr()->forward(br.boxes) : br.boxes;
  auto dbox = dist2bbox(dist, anchors.transpose(0, 1).unsqueeze(0), !options_.end2end, 1) * stride_t.transpose(0, 1);
  return torch::cat({dbox, br.scores.sigmoid(), br.mask_coefficient}, 1);
}

Tensor SegmentHeadImpl::decode(const HeadOutputs& out, const std::vector<double>& strides, int64_t max_det,
                               bool agnostic) const {
  auto y = decode_dense(out, strides);  // (B, 4+nc+nm, A)
  if (!options_.end2end) return y;
  auto preds = y.permute({0, 2, 1});  // (B, A, 4+nc+nm)
  auto parts = preds.split_with_sizes({4, options_.nc, options_.nm}, -1);
  auto boxes = parts[0], scores = parts[1], coefs = parts[2];
  auto anchors_n = scores.size(1), nc = scores.size(2);
  auto k = std::min(max_det, anchors_n);
  Tensor top_scores, labels, idx;
  if (agnostic) {
    auto [s, l] = scores.max(-1, true);
    auto [ts, ti] = s.topk(k, 1);
    top_scores = ts;
    labels = l.gather(1, ti).to(scores.scalar_type());
    idx = ti;
  } else {
    auto ori_index = std::get<1>(std::get<0>(scores.max(-1)).topk(k)).unsqueeze(-1);
    auto gathered = scores.gather(1, ori_index.expand({-1, -1, nc}));
    auto [ts, ti] = gathered.flatten(1).topk(k);
    top_scores = ts.unsqueeze(-1);
    labels = (ti % nc).unsqueeze(-1).to(scores.scalar_type());
    idx = ori_index.gather(1, torch::div(ti, nc, "floor").unsqueeze(-1));
  }
  boxes = boxes.gather(1, idx.expand({-1, -1, 4}));
  coefs = coefs.gather(1, idx.expand({-1, -1, options_.nm}));
  return torch::cat({boxes, top_scores, labels, coefs}, -1);
}

}  // namespace lucid::model
