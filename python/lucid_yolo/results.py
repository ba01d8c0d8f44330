"""Prediction results shaped as the reference's ``Results``: ``boxes`` (xyxy, xywh, xyxyn, xywhn,
conf, cls, data as torch tensors), ``masks`` (data, xy, xyn), ``names``, ``orig_shape``,
``orig_img``, ``path``, ``speed``, ``plot()``, ``save()``, ``summary()``, ``to_json()``."""
import json
from pathlib import Path

import numpy as np
import torch

from . import _lucid


def _tensor(raw, dtype, shape):
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape) if raw else torch.zeros(shape, dtype=dtype)


class Boxes:
    """``data`` is (n, 6): x1, y1, x2, y2 in image pixels, conf, cls (as the reference, cls is float)."""

    def __init__(self, data, orig_shape):
        self.data = data
        self.orig_shape = tuple(orig_shape)

    xyxy = property(lambda self: self.data[:, :4])
    conf = property(lambda self: self.data[:, 4])
    cls = property(lambda self: self.data[:, 5])
    id = None
    is_track = False
    shape = property(lambda self: self.data.shape)

    @property
    def xywh(self):
        b = self.xyxy
        return torch.stack(((b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]), 1)

    @property
    def xyxyn(self):
        h, w = self.orig_shape
        return self.xyxy / torch.tensor([w, h, w, h], dtype=self.data.dtype)

    @property
    def xywhn(self):
        h, w = self.orig_shape
        return self.xywh / torch.tensor([w, h, w, h], dtype=self.data.dtype)

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, i):
        return Boxes(self.data[i].reshape(-1, 6), self.orig_shape)

    def cpu(self):
        return self


class Masks:
    """``data`` is (n, H, W) float 0/1 at the original image's resolution (the reference's
    retina_masks form; see docs/python.md); ``xy`` the outline of each mask in image pixels
    (float32 (k, 2) arrays), ``xyn`` normalised by the image size."""

    def __init__(self, windows, outlines, orig_shape):
        self._windows = windows
        self._outlines = outlines
        self.orig_shape = tuple(orig_shape)
        self._data = None

    @property
    def data(self):
        if self._data is None:
            h, w = self.orig_shape
            self._data = torch.zeros((len(self._windows), h, w), dtype=torch.float32)
            for i, (x0, y0, mw, mh, raw) in enumerate(self._windows):
                if raw:
                    self._data[i, y0:y0 + mh, x0:x0 + mw] = _tensor(raw, torch.uint8, (mh, mw)).float()
        return self._data

    @property
    def xy(self):
        return [np.frombuffer(o, dtype=np.float32).reshape(-1, 2).copy() for o in self._outlines]

    @property
    def xyn(self):
        h, w = self.orig_shape
        return [p / np.array([w, h], dtype=np.float32) for p in self.xy]

    shape = property(lambda self: self.data.shape)

    def __len__(self):
        return len(self._windows)

    def cpu(self):
        return self


class Results:
    """One image's (or video frame's) detections."""

    def __init__(self, item, save_dir=None):
        self._item = item
        n = item["n"]
        self.path = item["path"]
        self.orig_shape = tuple(item["orig_shape"])
        self.names = dict(enumerate(item["names"]))
        boxes = _tensor(item["boxes"], torch.float32, (n, 4))
        conf = _tensor(item["conf"], torch.float32, (n,))
        cls = _tensor(item["cls"], torch.int64, (n,)).float()
        self.boxes = Boxes(torch.cat((boxes, conf[:, None], cls[:, None]), 1), self.orig_shape)
        # As the reference: no masks without detections.
        self.masks = Masks(item["masks"], item["outlines"], self.orig_shape) if n else None
        self.probs = self.keypoints = self.obb = None
        self.speed = {"preprocess": None, "inference": item["milliseconds"], "postprocess": None}
        self.save_dir = save_dir
        self.frame = item["frame"] if item["video"] else None

    @property
    def orig_img(self):
        """The image as the reference holds it: (H, W, 3) uint8, BGR."""
        h, w = self.orig_shape
        return np.frombuffer(self._item["image"], dtype=np.uint8).reshape(h, w, 3)[..., ::-1].copy()

    def __len__(self):
        return len(self.boxes)

    def cpu(self):
        return self

    def plot(self, conf=True, line_width=None, labels=True, boxes=True, masks=True, save=False, filename=None, **_):
        """The annotated image (H, W, 3) uint8 BGR, drawn as ``lucid predict save=True`` draws it."""
        h, w = self.orig_shape
        item = self._item
        windows = item["masks"] if masks else [(0, 0, 0, 0, b"")] * item["n"]
        rgb = _lucid.plot(item["image"], h, w, item["channels"], item["boxes"], item["conf"], item["cls"], windows,
                          item["names"], float(line_width or 0), bool(labels), bool(conf), bool(boxes))
        bgr = np.frombuffer(rgb, dtype=np.uint8).reshape(h, w, 3)[..., ::-1].copy()
        if save:
            _write_image(filename, bgr)
        return bgr

    def save(self, filename=None, *args, **kwargs):
        """Writes plot() to filename (default ``results_<image name>``) and returns the filename."""
        if not filename:
            filename = f"results_{Path(self.path).name}"
        Path(filename).absolute().parent.mkdir(parents=True, exist_ok=True)
        self.plot(*args, save=True, filename=filename, **kwargs)
        return filename

    def summary(self, normalize=False, decimals=5):
        """One dict per detection: name, class, confidence, box (x1 y1 x2 y2), segments (x, y)."""
        h, w = self.orig_shape if normalize else (1, 1)
        rows = []
        xy = self.masks.xy if self.masks is not None else []
        for i, (x1, y1, x2, y2, c, k) in enumerate(self.boxes.data.tolist()):
            row = {"name": self.names[int(k)], "class": int(k), "confidence": round(c, decimals),
                   "box": {"x1": round(x1 / w, decimals), "y1": round(y1 / h, decimals),
                           "x2": round(x2 / w, decimals), "y2": round(y2 / h, decimals)}}
            if self.masks is not None:
                row["segments"] = {"x": (xy[i][:, 0] / w).astype(float).round(decimals).tolist(),
                                   "y": (xy[i][:, 1] / h).astype(float).round(decimals).tolist()}
            rows.append(row)
        return rows

    def to_json(self, normalize=False, decimals=5):
        """summary() as a JSON list of records."""
        return json.dumps(self.summary(normalize, decimals))

    def verbose(self):
        counts = {}
        for k in self.boxes.cls.int().tolist():
            counts[k] = counts.get(k, 0) + 1
        return "".join(f"{n} {self.names[k]}, " for k, n in sorted(counts.items())) or "(no detections), "


def _write_image(filename, bgr):
    """JPEG or PNG by the file's extension, through the native encoders (no OpenCV needed)."""
    if not filename:
        raise ValueError("plot(save=True) needs filename=")
    _lucid.write_image(str(filename), np.ascontiguousarray(bgr[..., ::-1]).tobytes(), bgr.shape[0], bgr.shape[1])
