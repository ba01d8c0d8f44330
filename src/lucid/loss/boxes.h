// Box geometry for the loss and the assigner. Every formula keeps the reference's operation order and
// epsilons, so that FP32 results agree bit for bit where the same kernels run (the assigner's top-k
// and argmax decisions depend on it).
#pragma once
#include <torch/torch.h>

namespace lucid::loss {

using torch::Tensor;

// (x1, y1, x2, y2) <-> (cx, cy, w, h) along the last dimension (size 4).
Tensor xyxy_to_xywh(const Tensor& xyxy);
Tensor xywh_to_xyxy(const Tensor& xywh);

// Boxes (xyxy, broadcastable, last dim 4) -> result with last dim 1.
//   IoU  = inter / (area1 + area2 - inter + eps), heights carry +eps.
//   CIoU = IoU - (rho^2 / c^2 + v * alpha), c^2 = enclosing diagonal^2 + eps,
//          v = 4/pi^2 (atan(w2/h2) - atan(w1/h1))^2, alpha = v / (v - IoU + 1 + eps) without gradient.
Tensor box_iou_xyxy(const Tensor& box1, const Tensor& box2, double eps = 1e-7);
Tensor box_ciou_xyxy(const Tensor& box1, const Tensor& box2, double eps = 1e-7);

// Boxes xyxy -> distances (l, t, r, b) from anchor points; clamped to [0, max_dist - 0.01] when
// max_dist > 0 (the DFL range, reg_max - 1).
Tensor bbox_to_dist(const Tensor& anchor_points, const Tensor& bbox, double max_dist = -1);

}  // namespace lucid::loss
