"""The segmentation head (src/lucid/model/heads.h): per level box, class and mask-coefficient
branches (twice for end-to-end models: one-to-many and one-to-one), the prototypes, and the
inference outputs of docs/deploy.md decoded from them."""
import torch
from torch import nn

from .blocks import DFL, Conv, Proto, Proto26, dw_conv


def _chain(*modules):
    return nn.Sequential(*modules)


class SegmentHead(nn.Module):
    def __init__(self, nc=80, nm=32, npr=256, reg_max=16, end2end=False, legacy=False, proto26=False, ch=()):
        super().__init__()
        if len(ch) != 3:
            raise ValueError("segmentation heads take three feature levels")
        self.nc, self.nm, self.reg_max, self.end2end = nc, nm, reg_max, end2end
        self.strides = [8.0, 16.0, 32.0]  # set by the network from a probe forward
        c2 = max(16, ch[0] // 4, reg_max * 4)
        c3 = max(ch[0], min(nc, 100))
        c4 = max(ch[0] // 4, nm)

        def boxes():
            return nn.ModuleList(_chain(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for x in ch)

        def classes():
            if legacy:  # YOLOv8: plain 3x3 convolutions
                return nn.ModuleList(_chain(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
            return nn.ModuleList(_chain(_chain(dw_conv(x, x, 3), Conv(x, c3, 1)), _chain(dw_conv(c3, c3, 3), Conv(c3, c3, 1)),
                                        nn.Conv2d(c3, nc, 1)) for x in ch)

        def coefficients():
            return nn.ModuleList(_chain(Conv(x, c4, 3), Conv(c4, c4, 3), nn.Conv2d(c4, nm, 1)) for x in ch)

        # Registered in the C++ head's order: cv2, cv3, dfl, one2one_cv2, one2one_cv3, proto, cv4, one2one_cv4.
        self.cv2, self.cv3 = boxes(), classes()
        self.dfl = DFL(reg_max) if reg_max > 1 else nn.Identity()
        if end2end:
            self.one2one_cv2, self.one2one_cv3 = boxes(), classes()
        self.proto = Proto26(ch, npr, nm, nc) if proto26 else Proto(ch[0], npr, nm)
        self.cv4 = coefficients()
        if end2end:
            self.one2one_cv4 = coefficients()

    @staticmethod
    def _levels(feats, branch, channels):
        b = feats[0].shape[0]
        return torch.cat([m(x).view(b, channels, -1) for m, x in zip(branch, feats)], -1)

    def prototypes(self, feats):
        return self.proto(feats) if isinstance(self.proto, Proto26) else self.proto(feats[0])

    def anchors(self, feats):
        """Anchor centres (1, 2, A) in grid units and strides (1, A), from the features' shapes."""
        points, strides = [], []
        for x, s in zip(feats, self.strides):
            h, w = x.shape[2], x.shape[3]
            sx = torch.arange(w, dtype=x.dtype, device=x.device) + 0.5
            sy = torch.arange(h, dtype=x.dtype, device=x.device) + 0.5
            gy, gx = torch.meshgrid(sy, sx, indexing="ij")
            points.append(torch.stack((gx, gy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), s, dtype=x.dtype, device=x.device))
        return torch.cat(points).transpose(0, 1).unsqueeze(0), torch.cat(strides).transpose(0, 1)

    def dense(self, feats, one2one=False):
        """Every anchor decoded, (B, 4 + nc + nm, A): boxes cx cy w h in input pixels (x1 y1 x2 y2 for
        the one-to-one branch), class scores after the sigmoid, mask coefficients."""
        p = "one2one_" if one2one else ""
        boxes = self._levels(feats, getattr(self, p + "cv2"), 4 * self.reg_max)
        scores = self._levels(feats, getattr(self, p + "cv3"), self.nc)
        coefs = self._levels(feats, getattr(self, p + "cv4"), self.nm)
        dist = self.dfl(boxes)
        grid, stride = self.anchors(feats)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = grid - lt, grid + rb
        if not self.end2end:
            box = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        else:  # corners after the stride, then the centre form for the one-to-many branch
            x1y1, x2y2 = x1y1 * stride, x2y2 * stride
            box = torch.cat((x1y1, x2y2), 1) if one2one else torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1)
        return torch.cat((box, scores.sigmoid(), coefs), 1)

    def top_k(self, y, k):
        """The one-to-one branch's k best (anchor, class) pairs, (B, k, 6 + nm) rows x1 y1 x2 y2 score
        class coef..., as lucid predict takes them (not class-agnostic)."""
        boxes, scores, coefs = y.permute(0, 2, 1).split((4, self.nc, self.nm), -1)
        # Rows picked by advanced indexing rather than gather: Core ML's converter types int64 gather
        # indices as floats and refuses them.
        rows = torch.arange(y.shape[0], device=y.device).unsqueeze(-1)  # (B, 1)
        ori = scores.amax(-1).topk(k, 1)[1]  # (B, k) the anchors of the k best scores
        top, index = scores[rows, ori].flatten(1).topk(k, 1)
        labels = (index % self.nc).unsqueeze(-1).to(scores.dtype)
        idx = ori[rows, torch.div(index, self.nc, rounding_mode="floor")]
        return torch.cat((boxes[rows, idx], top.unsqueeze(-1), labels, coefs[rows, idx]), -1)

    def nms(self, y, conf, iou, max_det):
        """Class-aware NMS over the dense output (one label per anchor, the best class), as lucid
        predict computes it: per image the kept rows x1 y1 x2 y2 score class coef... by descending
        score, at most max_det, then zero rows: (B, max_det, 6 + nm). Needs torchvision's nms."""
        import torchvision  # noqa: F401  (registers torchvision::nms; called directly, which traces cleanly)

        nms = torch.ops.torchvision.nms
        class_offset = 7680.0  # boxes of different classes never overlap
        xywh, scores, coefs = y.permute(0, 2, 1).split((4, self.nc, self.nm), -1)
        xy, wh = xywh.split((2, 2), -1)
        box = torch.cat((xy - wh / 2, xy + wh / 2), -1)
        score, cls = scores.max(-1, keepdim=True)
        table = torch.cat((box, score, cls.to(box.dtype), coefs), -1)
        out = []
        for b in range(y.shape[0]):
            rows = table[b][score[b, :, 0] > conf]
            keep = nms((rows[:, :4] + rows[:, 5:6] * class_offset).float(), rows[:, 4].float(), iou)[:max_det]
            kept = rows[keep]
            out.append(torch.cat((kept, kept.new_zeros(max_det - kept.shape[0], kept.shape[1])), 0))
        return torch.stack(out)
