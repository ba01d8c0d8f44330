"""Validation metrics shaped as the reference's SegmentMetrics: ``metrics.box`` and ``metrics.seg``
(``Metric``: map, map50, map75, maps, mp, mr, p, r, f1, ap50, ap, ap_class_index), ``results_dict``,
``fitness``, ``speed``, ``names``, ``save_dir``."""
from pathlib import Path

import numpy as np


class Metric:
    """One set's numbers (boxes or masks). Per-class arrays cover the classes with ground truth
    (``ap_class_index``); ``maps`` has one value per class, the mean where a class has none."""

    def __init__(self, d, nc):
        self.p = np.asarray(d["p"], dtype=np.float64)
        self.r = np.asarray(d["r"], dtype=np.float64)
        self.f1 = np.asarray(d["f1"], dtype=np.float64)
        self.ap50 = np.asarray(d["ap50"], dtype=np.float64)
        self.ap = np.asarray(d["ap"], dtype=np.float64)
        self.ap_class_index = np.asarray(d["ap_class_index"], dtype=np.int64)
        self.mp, self.mr = d["mp"], d["mr"]
        self.map50, self.map75, self.map = d["map50"], d["map75"], d["map"]
        self.nc = nc

    @property
    def maps(self):
        maps = np.full(self.nc, self.map, dtype=np.float64)
        maps[self.ap_class_index] = self.ap
        return maps

    def mean_results(self):
        return [self.mp, self.mr, self.map50, self.map]

    def class_result(self, i):
        return self.p[i], self.r[i], self.ap50[i], self.ap[i]


class SegmentMetrics:
    """``model.val()`` and ``model.train()`` results."""

    def __init__(self, d, names, save_dir):
        self.names = dict(enumerate(names))
        nc = len(names)
        self.box = Metric(d["box"], nc)
        self.seg = Metric(d["seg"], nc)
        self.fitness = d["fitness"]
        self.results_dict = dict(d["results_dict"])
        self.speed = dict(d["speed"])
        self.save_dir = Path(save_dir)
        self.task = "segment"

    @property
    def keys(self):
        return [k for k in self.results_dict if k != "fitness"]

    @property
    def maps(self):
        return self.box.maps + self.seg.maps

    def mean_results(self):
        return self.box.mean_results() + self.seg.mean_results()

    @property
    def ap_class_index(self):
        return self.box.ap_class_index

    def __repr__(self):
        return f"SegmentMetrics({self.results_dict})"
