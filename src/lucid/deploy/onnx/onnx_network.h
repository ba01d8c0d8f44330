// lucid's segmentation network written as an ONNX graph, from its own module tree: every Conv with
// its BatchNorm folded into the kernel and bias (as deployed models are), the blocks of
// model/blocks.h, the head's branches, the box decoding and the outputs of docs/deploy.md:
//   images   (B, 3, H, W) FP32 RGB in [0, 1]
//   output0  one-to-one: (B, k, 6 + nm) rows x1 y1 x2 y2 score class coef..., the one-to-one
//            head's top-k (k = min(max_det, anchors)); NMS inside: (B, max_det, 6 + nm) rows of the
//            same form, the one-to-many head's detections after class-aware NMS as lucid predict
//            computes them, zero rows after the last; else (B, 4 + nc + nm, A) cx cy w h, class
//            scores after the sigmoid, mask coefficients (the one-to-many head, for NMS outside)
//   output1  (B, nm, H/4, W/4) mask prototypes
// The same arithmetic as EagerNetwork in FP32 (inference/network.h), up to the BatchNorm fold.
#pragma once
#include <cstdint>

#include "lucid/deploy/onnx/onnx_graph.h"
#include "lucid/model/model.h"

namespace lucid::engine::onnx {

struct NetworkLayout {
  bool one_to_one = false;  // the one-to-one head's top-k (end-to-end models only)
  bool nms = false;         // NMS inside, over the one-to-many head, at conf and iou
  double conf = 0.25, iou = 0.7;
  int64_t max_det = 300;
  bool dynamic = false;                          // batch, height and width named, not fixed
  int64_t batch = 1, height = 640, width = 640;  // the fixed input; a dynamic file's export size
};

// Adds the network's input, nodes and outputs to the graph.
void write_network(Graph& graph, const model::SegmentationModelImpl& model, const NetworkLayout& layout);

// Anchors (A) of an H x W input: (H/8)(W/8) + (H/16)(W/16) + (H/32)(W/32) for strides 8, 16, 32.
int64_t anchor_count(const model::SegmentationModelImpl& model, int64_t height, int64_t width);

}  // namespace lucid::engine::onnx
