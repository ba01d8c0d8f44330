"""Validation metrics shaped as the reference's SegmentMetrics: ``metrics.box`` and ``metrics.seg``
(``Metric``: p, r, f1, all_ap, ap50, ap, ap_class_index, map, map50, map75, maps, mp, mr, the
curves), ``results_dict``, ``fitness``, ``keys``, ``curves``, ``curves_results``,
``confusion_matrix``, ``nt_per_class``, ``nt_per_image``, ``summary()``, ``to_df()``,
``to_csv()``, ``to_json()``, ``speed``, ``names``, ``save_dir``; all from lucid's native validator
(python/src/convert.cpp metrics_dict)."""
import re
from pathlib import Path

import numpy as np

from ._export import ExportMixin

_CURVE_POINTS = 1000  # the confidence (and recall) axis: linspace(0, 1, 1000)


def _table(raw, cols):
    return np.frombuffer(raw, dtype=np.float64).reshape(-1, cols).copy()


class Metric:
    """One set's numbers (boxes or masks). Per-class arrays cover the classes with ground truth
    (``ap_class_index``); ``all_ap`` is (classes, 10), AP at IoU 0.50:0.05:0.95; ``p_curve``,
    ``r_curve``, ``f1_curve`` (classes, 1000) against confidence ``px``, ``prec_values`` (classes,
    1000) precision against recall ``px`` at IoU 0.5; ``maps`` has one value per class, the mean
    where a class has none."""

    def __init__(self, d, nc):
        self.p = np.asarray(d["p"], dtype=np.float64)
        self.r = np.asarray(d["r"], dtype=np.float64)
        self.f1 = np.asarray(d["f1"], dtype=np.float64)
        self.all_ap = _table(d["all_ap"], 10)
        self.ap_class_index = np.asarray(d["ap_class_index"], dtype=np.int64)
        self.px = np.linspace(0, 1, _CURVE_POINTS)
        self.p_curve = _table(d["p_curve"], _CURVE_POINTS)
        self.r_curve = _table(d["r_curve"], _CURVE_POINTS)
        self.f1_curve = _table(d["f1_curve"], _CURVE_POINTS)
        # As the reference: one row of zeros when no class has ground truth.
        self.prec_values = _table(d["pr_curve"], _CURVE_POINTS) if len(self.ap_class_index) else np.zeros((1, 1000))
        # The means as lucid val prints them (the same numbers as the arrays' means, to rounding).
        self.mp, self.mr = d["mp"], d["mr"]
        self.map50, self.map75, self.map = d["map50"], d["map75"], d["map"]
        self.nc = nc
        self.image_metrics = {}

    @property
    def ap50(self):
        return self.all_ap[:, 0] if len(self.all_ap) else []

    @property
    def ap(self):
        return self.all_ap.mean(1) if len(self.all_ap) else []

    @property
    def maps(self):
        maps = np.full(self.nc, self.map, dtype=np.float64)
        maps[self.ap_class_index] = self.ap
        return maps

    def mean_results(self):
        return [self.mp, self.mr, self.map50, self.map]

    def class_result(self, i):
        return self.p[i], self.r[i], self.ap50[i], self.ap[i]

    def fitness(self):
        """mAP50-95, the reference's weighting of (P, R, mAP50, mAP50-95)."""
        return float(np.nan_to_num(self.map))

    @property
    def curves(self):
        return []

    @property
    def curves_results(self):
        return [[self.px, self.prec_values, "Recall", "Precision"], [self.px, self.f1_curve, "Confidence", "F1"],
                [self.px, self.p_curve, "Confidence", "Precision"], [self.px, self.r_curve, "Confidence", "Recall"]]


def _column_names(names):
    """Class names as identifiers (other characters as _), unique ignoring case (_1, _2, ...)."""
    out, seen = [], set()
    for name in names:
        base = re.sub(r"[^a-zA-Z0-9_]", "_", name)
        clean, k = base, 1
        while clean.lower() in seen:
            clean, k = f"{base}_{k}", k + 1
        seen.add(clean.lower())
        out.append(clean)
    return out


class ConfusionMatrix(ExportMixin):
    """The box confusion matrix of a validation (the reference's detect task): ``matrix`` (nc + 1,
    nc + 1) counts indexed [predicted, true], the last row and column the background; detections
    above the validator's conf matched to labels at IoU > 0.45."""

    def __init__(self, matrix, names):
        self.task = "detect"
        self.names = dict(names)
        self.nc = len(self.names)
        self.matrix = np.asarray(matrix, dtype=np.float64).reshape(self.nc + 1, self.nc + 1)
        self.matches = None

    def tp_fp(self):
        """True and false positives per class (the background row and column left out)."""
        tp = self.matrix.diagonal()
        fp = self.matrix.sum(1) - tp
        return tp[:-1], fp[:-1]

    def print(self):
        for row in self.matrix:
            print(" ".join(map(str, row)))

    def summary(self, normalize=False, decimals=5):
        """One dict per predicted class (and background): its count for each true class, columns by
        class name; with normalize=True each true class's column sums to 1."""
        names = _column_names([*self.names.values(), "background"])
        m = self.matrix / ((self.matrix.sum(0).reshape(1, -1) + 1e-9) if normalize else 1)
        m = m.round(decimals)
        return [{"Predicted": names[i], **{names[j]: m[i, j] for j in range(len(names))}} for i in range(len(names))]


class SegmentMetrics(ExportMixin):
    """``model.val()`` and ``model.train()`` results."""

    def __init__(self, d, names, save_dir):
        self.names = dict(enumerate(names))
        nc = len(names)
        self.box = Metric(d["box"], nc)
        self.seg = Metric(d["seg"], nc)
        self.fitness = d["fitness"]
        self.speed = dict(d["speed"])
        self.save_dir = Path(save_dir)
        self.task = "segment"
        self.nt_per_class = np.asarray(d["instances_per_class"], dtype=np.int64)
        self.nt_per_image = np.asarray(d["images_per_class"], dtype=np.int64)
        self.confusion_matrix = ConfusionMatrix(np.frombuffer(d["confusion_matrix"], dtype=np.float64), self.names)

    @property
    def keys(self):
        return [f"metrics/{k}({s})" for s in "BM" for k in ("precision", "recall", "mAP50", "mAP50-95")]

    def mean_results(self):
        return self.box.mean_results() + self.seg.mean_results()

    def class_result(self, i):
        return self.box.class_result(i) + self.seg.class_result(i)

    @property
    def results_dict(self):
        return dict(zip([*self.keys, "fitness"], map(float, [*self.mean_results(), self.fitness])))

    @property
    def maps(self):
        return self.box.maps + self.seg.maps

    @property
    def ap_class_index(self):
        return self.box.ap_class_index

    @property
    def curves(self):
        return [f"{c}({s})" for s in "BM" for c in
                ("Precision-Recall", "F1-Confidence", "Precision-Confidence", "Recall-Confidence")]

    @property
    def curves_results(self):
        return self.box.curves_results + self.seg.curves_results

    def summary(self, normalize=True, decimals=5):
        """One dict per class with ground truth: Class, Images, Instances, Box-P, Box-R, Box-F1,
        mAP50, mAP75, mAP50-95 (of the boxes, as the reference's), Mask-P, Mask-R, Mask-F1."""
        rows = []
        for i, c in enumerate(self.ap_class_index.tolist()):
            rows.append({"Class": self.names[c], "Images": int(self.nt_per_image[c]),
                         "Instances": int(self.nt_per_class[c]), "Box-P": round(self.box.p[i], decimals),
                         "Box-R": round(self.box.r[i], decimals), "Box-F1": round(self.box.f1[i], decimals),
                         "mAP50": round(self.box.ap50[i], decimals), "mAP75": round(self.box.all_ap[i, 5], decimals),
                         "mAP50-95": round(self.box.ap[i], decimals), "Mask-P": round(self.seg.p[i], decimals),
                         "Mask-R": round(self.seg.r[i], decimals), "Mask-F1": round(self.seg.f1[i], decimals)})
        return rows

    def __repr__(self):
        return f"SegmentMetrics({self.results_dict})"
