"""Prediction results shaped as the reference's ``Results``: ``boxes`` (xyxy, xywh, xyxyn, xywhn,
conf, cls, data), ``masks`` (data, xy, xyn), ``names``, ``orig_shape``, ``orig_img``, ``path``,
``speed``, ``save_dir``; indexing (``r[i]``, ``r.boxes[i]``, ``r.masks[i]``), ``cpu()``,
``numpy()``, ``cuda()``, ``to()``, ``plot()``, ``save()``, ``save_txt()``, ``save_crop()``,
``summary()``, ``to_df()``, ``to_csv()``, ``to_json()``, ``verbose()``."""
from pathlib import Path

import numpy as np
import torch

from . import _lucid
from ._export import ExportMixin


def _tensor(raw, dtype, shape):
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape) if raw else torch.zeros(shape, dtype=dtype)


class _Data:
    """The data of one kind of detection (torch tensor or numpy array) and the image's (h, w): device
    and type moves return a new object of the same class, as the reference's BaseTensor."""

    def __init__(self, data, orig_shape):
        if not isinstance(data, (torch.Tensor, np.ndarray)):
            raise TypeError(f"{type(self).__name__}: data must be a torch.Tensor or numpy.ndarray, not {type(data).__name__}")
        self.data = data
        self.orig_shape = tuple(orig_shape)

    shape = property(lambda self: self.data.shape)

    def _new(self, data):
        return type(self)(data, self.orig_shape)

    def cpu(self):
        return self if isinstance(self.data, np.ndarray) else self._new(self.data.cpu())

    def numpy(self):
        return self if isinstance(self.data, np.ndarray) else self._new(self.data.cpu().numpy())

    def cuda(self):
        return self._new(torch.as_tensor(self.data).cuda())

    def to(self, *args, **kwargs):
        return self._new(torch.as_tensor(self.data).to(*args, **kwargs))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self._new(self.data[idx])


def _copy(a):
    return a.clone() if isinstance(a, torch.Tensor) else np.copy(a)


class Boxes(_Data):
    """``data`` is (n, 6): x1, y1, x2, y2 in image pixels, conf, cls (as the reference, cls is float);
    (n, 7) with a track id before conf."""

    def __init__(self, data, orig_shape):
        if data.ndim == 1:
            data = data[None, :]
        if data.shape[-1] not in (6, 7):
            raise ValueError(f"Boxes: expected 6 or 7 values per box, got {data.shape[-1]}")
        super().__init__(data, orig_shape)
        self.is_track = data.shape[-1] == 7

    xyxy = property(lambda self: self.data[:, :4])
    conf = property(lambda self: self.data[:, -2])
    cls = property(lambda self: self.data[:, -1])
    id = property(lambda self: self.data[:, -3] if self.is_track else None)

    @property
    def xywh(self):
        b = self.xyxy
        out = torch.empty_like(b) if isinstance(b, torch.Tensor) else np.empty_like(b)
        out[..., 0] = (b[..., 0] + b[..., 2]) / 2
        out[..., 1] = (b[..., 1] + b[..., 3]) / 2
        out[..., 2] = b[..., 2] - b[..., 0]
        out[..., 3] = b[..., 3] - b[..., 1]
        return out

    def _normalized(self, b):
        h, w = self.orig_shape
        b[..., [0, 2]] /= w
        b[..., [1, 3]] /= h
        return b

    @property
    def xyxyn(self):
        return self._normalized(_copy(self.xyxy))

    @property
    def xywhn(self):
        return self._normalized(self.xywh)


def _closest_pair(a, b):
    """Indices (i, j) of the closest points a[i], b[j] (the first pair in row order on ties)."""
    d = ((a[:, None, :].astype(np.float64) - b[None, :, :]) ** 2).sum(-1)
    return np.unravel_index(np.argmin(d), d.shape)


def _join_contours(contours):
    """One polygon through several closed contours, as the reference's Masks.xy joins the regions of a
    mask: each contour is linked to the next at their closest points and the chain is walked forward
    through every contour and back through the middle ones, so that the polygon returns to where it
    started along the same (zero-width) links."""
    contours = [np.asarray(c) for c in contours]
    n = len(contours)
    links = [[] for _ in range(n)]
    for i in range(1, n):
        a, b = _closest_pair(contours[i - 1], contours[i])
        links[i - 1].append(int(a))
        links[i].append(int(b))
    forward, back = [], []
    for i, (c, link) in enumerate(zip(contours, links)):
        if len(link) == 2 and link[0] > link[1]:  # walk the middle contour the other way round
            link = [len(c) - 1 - k for k in link]
            c = c[::-1]
        c = np.roll(c, -link[0], axis=0)
        c = np.concatenate((c, c[:1]))  # closed: back to the link point
        if i in (0, n - 1):
            forward.append(c)
        else:
            forward.append(c[:link[1] - link[0] + 1])
            back.append(c[link[1] - link[0]:])
    return np.concatenate(forward + back[::-1])


def _mask_polygon(contours):
    if not contours:
        return np.zeros((0, 2), dtype=np.float32)
    c = contours[0] if len(contours) == 1 else _join_contours(contours)
    return np.array(c, dtype=np.float32)  # a copy: the contours are kept for the next read


def _contours_of(mask):
    """The outer contours of one (H, W) mask (nonzero as uint8 = inside), as OpenCV finds them."""
    m = (mask.to(torch.uint8).cpu().numpy() if isinstance(mask, torch.Tensor) else mask.astype(np.uint8))
    h, w = m.shape
    return [np.frombuffer(c, dtype=np.float32).reshape(-1, 2) for c in
            _lucid.mask_contours(np.ascontiguousarray(m).tobytes(), h, w)]


class Masks(_Data):
    """``data`` is (n, H, W) float 0/1 at the original image's resolution (the reference's
    retina_masks form; see docs/python.md); ``xy`` one polygon per mask in image pixels (float32
    (k, 2) arrays: every region of the mask joined as the reference joins them), ``xyn`` normalised
    by the image size. A prediction's masks are built from their boxes' windows when first read."""

    def __init__(self, data, orig_shape):
        if data is not None and data.ndim == 2:
            data = data[None, :]
        self._data = data
        self.orig_shape = tuple(orig_shape)
        self._windows = None  # the predictor's (x0, y0, w, h, uint8 bytes) per mask
        self._contours = None  # per mask, its outer contours in image pixels

    @classmethod
    def _native(cls, windows, contours, orig_shape):
        m = cls(None, orig_shape)
        m._windows = list(windows)
        m._contours = [[np.frombuffer(c, dtype=np.float32).reshape(-1, 2) for c in cs] for cs in contours]
        return m

    @property
    def data(self):
        if self._data is None:
            h, w = self.orig_shape
            self._data = torch.zeros((len(self._windows), h, w), dtype=torch.float32)
            for i, (x0, y0, mw, mh, raw) in enumerate(self._windows):
                if raw:
                    self._data[i, y0:y0 + mh, x0:x0 + mw] = _tensor(raw, torch.uint8, (mh, mw)).float()
        return self._data

    @data.setter
    def data(self, value):
        self._data, self._windows, self._contours = value, None, None

    def _new(self, data, pick=None):
        """Same masks (or those at `pick`) holding `data`; what is known of them besides stays known."""
        m = Masks(data, self.orig_shape)
        if pick is not None or data is self._data:
            keep = (lambda v: v) if pick is None else pick
            m._windows = keep(self._windows) if self._windows is not None else None
            m._contours = keep(self._contours) if self._contours is not None else None
        elif self._contours is not None:  # a move or a type change keeps every pixel's inside or not
            m._contours = self._contours
        return m

    def __len__(self):
        return len(self._windows) if self._data is None else len(self._data)

    def __getitem__(self, idx):
        if self._data is None:  # the windows alone, without building every mask
            picked = np.arange(len(self))[idx]
            pick = (lambda v: [v[int(i)] for i in np.atleast_1d(picked)])
            m = Masks(None, self.orig_shape)
            m._windows, m._contours = pick(self._windows), pick(self._contours)
            return m
        return self._new(self.data[idx], None if self._contours is None else
                         (lambda v: [v[int(i)] for i in np.atleast_1d(np.arange(len(self))[idx])]))

    def _polygons(self):
        contours = self._contours if self._contours is not None else [_contours_of(m) for m in self.data]
        polygons = [_mask_polygon(c) for c in contours]
        # The masks' frame (H, W) mapped to the image (the identity for masks at the image's size).
        mh, mw = (self.data.shape[1:] if self._contours is None else self.orig_shape)
        h, w = self.orig_shape
        gain = min(mh / h, mw / w)
        nh, nw = max(round(h * gain), 1), max(round(w * gain), 1)
        pad = round((mw - nw) / 2 - 0.1), round((mh - nh) / 2 - 0.1)
        for p in polygons:
            p[:, 0] = ((p[:, 0] - pad[0]) / (nw / w)).clip(0, w)
            p[:, 1] = ((p[:, 1] - pad[1]) / (nh / h)).clip(0, h)
        return polygons

    @property
    def xy(self):
        return self._polygons()

    @property
    def xyn(self):
        h, w = self.orig_shape
        polygons = self._polygons()
        for p in polygons:
            p[:, 0] /= w
            p[:, 1] /= h
        return polygons

    def cpu(self):
        return self if self._data is None or isinstance(self._data, np.ndarray) else self._new(self._data.cpu())

    def numpy(self):
        return self if isinstance(self._data, np.ndarray) else self._new(self.data.cpu().numpy())


class Results(ExportMixin):
    """One image's (or video frame's) detections, as the reference's Results(orig_img, path, names,
    boxes, masks, speed=...) holds them; ``frame`` is the video frame's number (None for images)."""

    _keys = ("boxes", "masks", "probs", "keypoints", "obb", "semantic_mask", "depth")

    def __init__(self, orig_img, path, names, boxes=None, masks=None, probs=None, keypoints=None, obb=None, speed=None,
                 **_):
        self._rgb = None
        self._orig_img = orig_img
        self.orig_shape = tuple(orig_img.shape[:2])
        self.boxes = Boxes(boxes, self.orig_shape) if boxes is not None else None
        self.masks = Masks(masks, self.orig_shape) if masks is not None else None
        if probs is not None or keypoints is not None or obb is not None:
            raise ValueError("Results: lucid predicts segmentation (boxes and masks), not probs, keypoints or obb")
        self.probs = self.keypoints = self.obb = self.semantic_mask = self.depth = None
        self.speed = speed if speed is not None else {"preprocess": None, "inference": None, "postprocess": None}
        self.names = names
        self.path = path
        self.save_dir = None
        self.frame = None

    @classmethod
    def _native(cls, item, save_dir=None):
        """A predicted image as the binding hands it over (python/src/convert.cpp prediction_dict)."""
        r = cls.__new__(cls)
        n = item["n"]
        r._rgb = item["image"]  # the BGR copy is made when orig_img is first read
        r._orig_img = None
        r.orig_shape = tuple(item["orig_shape"])
        r.path = item["path"]
        r.names = dict(enumerate(item["names"]))
        boxes = _tensor(item["boxes"], torch.float32, (n, 4))
        conf = _tensor(item["conf"], torch.float32, (n,))
        cls_ = _tensor(item["cls"], torch.int64, (n,)).float()
        r.boxes = Boxes(torch.cat((boxes, conf[:, None], cls_[:, None]), 1), r.orig_shape)
        # As the reference: no masks without detections.
        r.masks = Masks._native(item["masks"], item["outlines"], r.orig_shape) if n else None
        r.probs = r.keypoints = r.obb = r.semantic_mask = r.depth = None
        r.speed = {"preprocess": None, "inference": item["milliseconds"], "postprocess": None}
        r.save_dir = save_dir
        r.frame = item["frame"] if item["video"] else None
        return r

    @property
    def orig_img(self):
        """The image as the reference holds it: (H, W, 3) uint8, BGR."""
        if self._orig_img is None:
            h, w = self.orig_shape
            self._orig_img = np.frombuffer(self._rgb, dtype=np.uint8).reshape(h, w, 3)[..., ::-1].copy()
        return self._orig_img

    @orig_img.setter
    def orig_img(self, value):
        self._orig_img, self._rgb = value, None

    def new(self):
        """An empty Results of the same image, path, names, speed and save_dir."""
        r = Results.__new__(Results)
        r._rgb, r._orig_img, r.orig_shape = self._rgb, self._orig_img, self.orig_shape
        r.boxes = r.masks = r.probs = r.keypoints = r.obb = r.semantic_mask = r.depth = None
        r.speed, r.names, r.path, r.save_dir, r.frame = self.speed, self.names, self.path, self.save_dir, self.frame
        return r

    def _apply(self, fn, *args, **kwargs):
        r = self.new()
        for k in self._keys:
            v = getattr(self, k)
            if v is not None:
                setattr(r, k, getattr(v, fn)(*args, **kwargs))
        return r

    def __getitem__(self, idx):
        return self._apply("__getitem__", idx)

    def __len__(self):
        for k in self._keys:
            v = getattr(self, k)
            if v is not None:
                return len(v)
        return 0

    def cpu(self):
        return self._apply("cpu")

    def numpy(self):
        return self._apply("numpy")

    def cuda(self):
        return self._apply("cuda")

    def to(self, *args, **kwargs):
        return self._apply("to", *args, **kwargs)

    def update(self, boxes=None, masks=None, **_):
        """New boxes (clipped to the image, as the reference) and/or masks."""
        if boxes is not None:
            h, w = self.orig_shape
            boxes = _copy(boxes)
            if isinstance(boxes, torch.Tensor):
                boxes[..., [0, 2]] = boxes[..., [0, 2]].clamp(0, w)
                boxes[..., [1, 3]] = boxes[..., [1, 3]].clamp(0, h)
            else:
                boxes[..., [0, 2]] = boxes[..., [0, 2]].clip(0, w)
                boxes[..., [1, 3]] = boxes[..., [1, 3]].clip(0, h)
            self.boxes = Boxes(boxes, self.orig_shape)
        if masks is not None:
            self.masks = Masks(masks, self.orig_shape)

    def plot(self, conf=True, line_width=None, labels=True, boxes=True, masks=True, save=False, filename=None, **_):
        """The annotated image (H, W, 3) uint8 BGR, drawn as ``lucid predict save=True`` draws it."""
        h, w = self.orig_shape
        rgb = self._rgb if self._rgb is not None else np.ascontiguousarray(self.orig_img[..., ::-1]).tobytes()
        d = torch.as_tensor(self.boxes.cpu().data if self.boxes is not None else np.zeros((0, 6), np.float32))
        n = len(d)
        names = [self.names.get(k, str(k)) for k in range(max(self.names, default=-1) + 1)]
        cls = d[:, -1].to(torch.int64)
        if d.shape[1] == 7:  # tracked boxes: "id:N name" tags, as the reference's
            cls, names = _track_labels(cls, d[:, -3].to(torch.int64), names)
        rgb = _lucid.plot(rgb, h, w, 3, d[:, :4].float().contiguous().numpy().tobytes(),
                          d[:, -2].float().contiguous().numpy().tobytes(),
                          cls.contiguous().numpy().tobytes(), self._mask_windows(masks, n), names,
                          float(line_width or 0), bool(labels), bool(conf), bool(boxes))
        bgr = np.frombuffer(rgb, dtype=np.uint8).reshape(h, w, 3)[..., ::-1].copy()
        if save:
            _write_image(filename, bgr)
        return bgr

    def _mask_windows(self, draw, n):
        if not draw or self.masks is None:
            return [(0, 0, 0, 0, b"")] * n
        if self.masks._windows is not None:
            return self.masks._windows
        h, w = self.orig_shape
        data = torch.as_tensor(self.masks.cpu().data)
        return [(0, 0, w, h, (m > 0.5).to(torch.uint8).contiguous().numpy().tobytes()) for m in data]

    def save(self, filename=None, *args, **kwargs):
        """Writes plot() to filename (default ``results_<image name>``) and returns the filename."""
        if not filename:
            filename = f"results_{Path(self.path).name}"
        Path(filename).absolute().parent.mkdir(parents=True, exist_ok=True)
        self.plot(*args, save=True, filename=filename, **kwargs)
        return filename

    def save_txt(self, txt_file, save_conf=False):
        """Appends one line per detection to txt_file in YOLO segment label form: class, then the
        mask polygon's x y pairs normalised by the image size (the box xywhn without masks), then the
        confidence with save_conf=True; a polygon of fewer than 3 points is left out (no loader takes
        it) and nothing is written when no line remains. Returns txt_file as a string."""
        lines = []
        boxes = self.boxes.cpu() if self.boxes is not None else None
        if boxes is not None and len(boxes):
            coords = boxes.xywhn.reshape(len(boxes), -1).tolist()
            polygons = self.masks.xyn if self.masks is not None else None
            for j, (c, conf) in enumerate(zip(boxes.cls.tolist(), boxes.conf.tolist())):
                values = coords[j]
                if polygons is not None:
                    if len(polygons[j]) < 3:
                        continue
                    values = polygons[j].reshape(-1).tolist()
                values = [int(c), *values] + [float(conf)] * bool(save_conf)
                if boxes.is_track:
                    values.append(int(boxes.id[j]))
                lines.append(" ".join("%g" % v for v in values))
        if lines:
            Path(txt_file).parent.mkdir(parents=True, exist_ok=True)
            with open(txt_file, "a", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
        return str(txt_file)

    def save_crop(self, save_dir, file_name=Path("im.jpg")):
        """Each detection's box cut from the image, widened by 2% and 10 px as the reference's, into
        save_dir/<class name>/<file_name>.jpg (-2, -3, ... when that file exists)."""
        if self.boxes is None:
            return
        img = self.orig_img
        for x1, y1, x2, y2, *_, k in self.boxes.cpu().data.tolist():
            crop = _box_crop(img, (x1, y1, x2, y2))
            _write_image(_unique_path(Path(save_dir) / self.names[int(k)] / Path(file_name).with_suffix(".jpg")), crop)

    def summary(self, normalize=False, decimals=5):
        """One dict per detection: name, class, confidence, box (x1 y1 x2 y2), track_id when tracked,
        segments (x, y)."""
        rows = []
        if not self.boxes:
            return rows
        boxes = self.boxes.cpu()
        h, w = self.orig_shape if normalize else (1, 1)
        xy = self.masks.xy if self.masks else None
        for i, (x1, y1, x2, y2) in enumerate(boxes.xyxy.tolist()):
            k = int(boxes.cls[i])
            row = {"name": self.names[k], "class": k, "confidence": round(float(boxes.conf[i]), decimals),
                   "box": {"x1": round(x1 / w, decimals), "y1": round(y1 / h, decimals),
                           "x2": round(x2 / w, decimals), "y2": round(y2 / h, decimals)}}
            if boxes.is_track:
                row["track_id"] = int(boxes.id[i])
            if xy is not None:
                row["segments"] = {"x": (xy[i][:, 0] / w).astype(float).round(decimals).tolist(),
                                   "y": (xy[i][:, 1] / h).astype(float).round(decimals).tolist()}
            rows.append(row)
        return rows

    def verbose(self):
        """'2 persons, 1 car, ' (the count of each class, in class order), or '(no detections), '."""
        if len(self) == 0 or self.boxes is None:
            return "(no detections), "
        counts = torch.as_tensor(self.boxes.cls).to(torch.int64).cpu().bincount().tolist()
        return "".join(f"{n} {self.names[k]}{'s' * (n > 1)}, " for k, n in enumerate(counts) if n > 0)


def _track_labels(cls, ids, names):
    """(class numbers, names) that draw each tracked box with its own tag, "id:N name", in its class's
    colour: box i gets number 20 * i + cls % 20 (the native palette repeats every 20 classes)."""
    out = []
    for i, (k, track_id) in enumerate(zip(cls.tolist(), ids.tolist())):
        out += [""] * (20 * i + k % 20 - len(out)) + [f"id:{track_id} {names[k] if k < len(names) else k}"]
    return torch.tensor([20 * i + k % 20 for i, k in enumerate(cls.tolist())], dtype=torch.int64), out


def _box_crop(img, xyxy, gain=1.02, pad=10):
    """The box's centre kept, its width and height * gain + pad, truncated to whole pixels and
    clipped to the image, in float32 as the reference's save_one_box (square=False) computes it."""
    b = torch.tensor(xyxy, dtype=torch.float32)
    centre, size = (b[:2] + b[2:]) / 2, (b[2:] - b[:2]) * gain + pad
    half = size / 2
    x1, y1, x2, y2 = torch.cat((centre - half, centre + half)).long().tolist()
    h, w = img.shape[:2]
    x1, x2 = (min(max(v, 0), w) for v in (x1, x2))
    y1, y2 = (min(max(v, 0), h) for v in (y1, y2))
    return img[y1:y2, x1:x2]


def _unique_path(path):
    """path, or path with -2, -3, ... before its suffix when it exists (as the reference numbers
    a crop whose file exists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        return path
    n = 2
    while path.with_name(f"{path.stem}-{n}{path.suffix}").exists():
        n += 1
    return path.with_name(f"{path.stem}-{n}{path.suffix}")


def _write_image(filename, bgr):
    """JPEG or PNG by the file's extension, through the native encoders (no OpenCV needed)."""
    if not filename:
        raise ValueError("plot(save=True) needs filename=")
    bgr = np.ascontiguousarray(bgr)
    _lucid.write_image(str(filename), np.ascontiguousarray(bgr[..., ::-1]).tobytes(), bgr.shape[0], bgr.shape[1])
