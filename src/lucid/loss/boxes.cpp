#include "lucid/loss/boxes.h"

#include <cmath>
#include <numbers>

namespace lucid::loss {

Tensor xyxy_to_xywh(const Tensor& xyxy) {
  auto c = xyxy.unbind(-1);
  return torch::stack({(c[0] + c[2]) / 2, (c[1] + c[3]) / 2, c[2] - c[0], c[3] - c[1]}, -1);
}

Tensor xywh_to_xyxy(const Tensor& xywh) {
  auto xy = xywh.narrow(-1, 0, 2);
  auto half = xywh.narrow(-1, 2, 2) / 2;
  return torch::cat({xy - half, xy + half}, -1);
}

namespace {

struct Pair {
  Tensor ax1, ay1, ax2, ay2, bx1, by1, bx2, by2;  // (..., 1) each
  Tensor w1, h1, w2, h2;                          // heights carry +eps
  Tensor iou;
};

Pair iou_parts(const Tensor& box1, const Tensor& box2, double eps) {
  Pair p;
  auto a = box1.chunk(4, -1);
  auto b = box2.chunk(4, -1);
  p.ax1 = a[0], p.ay1 = a[1], p.ax2 = a[2], p.ay2 = a[3];
  p.bx1 = b[0], p.by1 = b[1], p.bx2 = b[2], p.by2 = b[3];
  p.w1 = p.ax2 - p.ax1, p.h1 = p.ay2 - p.ay1 + eps;
  p.w2 = p.bx2 - p.bx1, p.h2 = p.by2 - p.by1 + eps;
  auto inter = (torch::minimum(p.ax2, p.bx2) - torch::maximum(p.ax1, p.bx1)).clamp_min(0) *
               (torch::minimum(p.ay2, p.by2) - torch::maximum(p.ay1, p.by1)).clamp_min(0);
  auto uni = p.w1 * p.h1 + p.w2 * p.h2 - inter + eps;
  p.iou = inter / uni;
  return p;
}

}  // namespace

Tensor box_iou_xyxy(const Tensor& box1, const Tensor& box2, double eps) { return iou_parts(box1, box2, eps).iou; }

Tensor box_ciou_xyxy(const Tensor& box1, const Tensor& box2, double eps) {
  auto p = iou_parts(box1, box2, eps);
  auto cw = torch::maximum(p.ax2, p.bx2) - torch::minimum(p.ax1, p.bx1);  // enclosing box
  auto ch = torch::maximum(p.ay2, p.by2) - torch::minimum(p.ay1, p.by1);
  auto c2 = cw.pow(2) + ch.pow(2) + eps;
  auto rho2 = ((p.bx1 + p.bx2 - p.ax1 - p.ax2).pow(2) + (p.by1 + p.by2 - p.ay1 - p.ay2).pow(2)) / 4;
  const double k = 4 / (std::numbers::pi * std::numbers::pi);
  auto v = k * ((p.w2 / p.h2).atan() - (p.w1 / p.h1).atan()).pow(2);
  Tensor alpha;
  {
    torch::NoGradGuard no_grad;
    alpha = v / (1.0 - p.iou + v + eps);  // the reference 8.4.190 order of terms
  }
  return p.iou - (rho2 / c2 + v * alpha);
}

Tensor bbox_to_dist(const Tensor& anchor_points, const Tensor& bbox, double max_dist) {
  auto xy = bbox.chunk(2, -1);
  auto dist = torch::cat({anchor_points - xy[0], xy[1] - anchor_points}, -1);
  if (max_dist > 0) dist = dist.clamp(0, max_dist - 0.01);
  return dist;
}

}  // namespace lucid::loss
