"""The network as the deployment formats carry it (docs/deploy.md): BatchNorms folded, eval mode,
images (B, 3, H, W) RGB in [0, 1] in, (output0, output1) out, in one of the layouts lucid's ONNX
writer also writes (src/lucid/deploy/onnx/onnx_network.h):
  one_to_one  (B, k, 6 + nm) the one-to-one head's top-k, k = min(max_det, anchors) (end-to-end models)
  nms         (B, max_det, 6 + nm) the one-to-many head after class-aware NMS, zero rows after the last
  dense       (B, 4 + nc + nm, A) the one-to-many head, cx cy w h, scores, coefficients (NMS outside);
              normalized: boxes divided by the input's width and height
and output1 the prototypes (B, nm, H/4, W/4)."""
import copy

import torch
from torch import nn

from .blocks import fold_batch_norms

LAYOUTS = ("one_to_one", "nms", "dense")


class DeployedNetwork(nn.Module):
    def __init__(self, network, layout, max_det=300, conf=0.25, iou=0.7, normalized=False):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
        if layout == "one_to_one" and not network.end2end:
            raise ValueError("the one-to-one layout needs an end-to-end model (yolo26)")
        with torch.no_grad():
            self.network = fold_batch_norms(copy.deepcopy(network)).eval().requires_grad_(False)
        self.layout, self.max_det, self.conf, self.iou, self.normalized = layout, max_det, conf, iou, normalized

    def forward(self, images):
        feats = self.network.features(images)
        head = self.network.head
        protos = head.prototypes(feats)
        if self.layout == "one_to_one":
            y = head.dense(feats, one2one=True)
            return head.top_k(y, min(self.max_det, y.shape[2])), protos
        y = head.dense(feats)
        if self.layout == "nms":
            return head.nms(y, self.conf, self.iou, self.max_det), protos
        if self.normalized:
            h, w = images.shape[2], images.shape[3]
            size = torch.tensor([w, h, w, h], dtype=y.dtype, device=y.device).view(1, 4, 1)
            y = torch.cat((y[:, :4] / size, y[:, 4:]), 1)
        return y, protos


def default_layout(network, nms):
    """The layout of `lucid export ... nms=`: True -> NMS inside; False -> the one-to-one top-k of an
    end-to-end model, else dense; None (not given) -> dense."""
    if nms:
        return "nms"
    return "one_to_one" if nms is False and network.end2end else "dense"
