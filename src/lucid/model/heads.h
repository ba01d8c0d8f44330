// Segmentation heads: Segment (YOLOv8/11, one-to-many) and Segment26 (adds the one-to-one branch on
// detached features and Proto26 with its semantic branch). They consume the shared features
// (P3, P4, P5) and return raw predictions; decoding for inference is separate.
#pragma once
#include <optional>

#include "lucid/model/blocks.h"

namespace lucid::model {

// One branch's raw predictions, flattened over levels (P3 first, row-major).
struct BranchOutputs {
  Tensor boxes;             // (B, 4*reg_max, A)
  Tensor scores;            // (B, nc, A) logits
  Tensor mask_coefficient;  // (B, nm, A)
  Tensor proto;             // (B, nm, H/4, W/4)
  Tensor semantic;          // (B, nc, H/8, W/8) logits; Segment26 in training only
};

struct HeadOutputs {
  BranchOutputs one2many;
  std::optional<BranchOutputs> one2one;  // end2end heads
  std::vector<Tensor> feats;             // the shared features the heads consumed
  // The branch inference uses: one-to-one for end2end heads, else one-to-many.
  const BranchOutputs& primary() const { return one2one ? *one2one : one2many; }
};

struct SegmentHeadOptions {
  int64_t nc = 80, nm = 32, npr = 256, reg_max = 16;
  bool end2end = false;
  bool legacy = false;   // YOLOv8: plain 3x3 conv class branch instead of depthwise
  bool proto26 = false;  // Segment26
  std::vector<int64_t> ch;
};

class SegmentHeadImpl : public torch::nn::Module {
 public:
  explicit SegmentHeadImpl(const SegmentHeadOptions& options);

  HeadOutputs forward(const std::vector<Tensor>& feats);

  // The head's predictions, each its own function of the shared features, in the order forward()
  // computes them: boxes, scores and mask coefficients of the one-to-many branch; the same three
  // of the one-to-one branch (end2end heads; from detached features in training); then the
  // prototypes (with the semantic logits for Segment26 in training, which share their features).
  // forward() is compose() of predict() over every k, so stage replay runs the same expressions.
  int64_t prediction_count() const { return options_.end2end ? 7 : 4; }
  std::string prediction_name(int64_t k) const;
  bool prediction_detached(int64_t k) const { return options_.end2end && k >= 3 && k < 6; }
  std::vector<Tensor> prediction_parameters(int64_t k) const;
  std::vector<Tensor> predict(int64_t k, const std::vector<Tensor>& feats);
  HeadOutputs compose(const std::vector<Tensor>& feats, const std::vector<std::vector<Tensor>>& predictions) const;

  // Detect-style bias initialisation: box bias 2.0, class bias log(5 / nc / (640 / stride)^2).
  void bias_init(const std::vector<double>& strides);

  // Inference output from raw predictions: end2end -> (B, k, 6 + nm) rows [x1 y1 x2 y2 score class
  // coefs] with k = min(max_det, A); otherwise (B, 4 + nc + nm, A) with xywh boxes.
  Tensor decode(const HeadOutputs& out, const std::vector<double>& strides, int64_t max_det = 300,
                bool agnostic = false) const;
  // Every anchor decoded: (B, 4 + nc + nm, A), boxes xyxy for end2end heads, else xywh; scores sigmoid.
  Tensor decode_dense(const HeadOutputs& out, const std::vector<double>& strides) const;

  const SegmentHeadOptions& options() const { return options_; }

 private:
  using Branch = std::vector<Chain>;
  // One prediction over all levels, flattened to (B, channels, A).
  Tensor run_levels(const std::vector<Tensor>& x, const Branch& convs, int64_t channels);
  void make_branch(const std::string& prefix, Branch& box, Branch& cls, Branch& mask);

  SegmentHeadOptions options_;
  Branch cv2_, cv3_, cv4_, o2o_cv2_, o2o_cv3_, o2o_cv4_;
  DFL dfl_{nullptr};
  Proto proto_{nullptr};
  Proto26 proto26_{nullptr};
};
TORCH_MODULE(SegmentHead);

// Grid anchor centres (A, 2) in grid units and per-anchor strides (A, 1).
std::pair<Tensor, Tensor> make_anchors(const std::vector<Tensor>& feats, const std::vector<double>& strides,
                                       double offset = 0.5);

// ltrb distances -> boxes around anchor points, along dim.
Tensor dist2bbox(const Tensor& distance, const Tensor& anchor_points, bool xywh, int64_t dim);

}  // namespace lucid::model
