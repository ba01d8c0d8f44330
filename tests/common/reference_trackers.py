"""The reference's trackers as oracles (the project venv's ultralytics): its input type and, where the
venv lacks lap (the reference's assignment solver, pip-installed on first use), a stand-in with
lap.lapjv's semantics for extend_cost=True, cost_limit=L: the matrix padded to (n+m) x (n+m) with L/2
for leaving a row or a column unpaired, solved exactly by scipy."""
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml


def lapjv(cost, extend_cost=False, cost_limit=np.inf, return_cost=True):
    """lap.lapjv for a rectangular matrix with cost_limit: (total, x, y), x[i] the column of row i or -1."""
    from scipy.optimize import linear_sum_assignment

    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    big = np.full((n + m, n + m), cost_limit / 2.0)
    big[n:, m:] = 0
    big[:n, :m] = cost
    r, c = linear_sum_assignment(big)
    x = np.where(c[:n] < m, c[:n], -1)
    y = np.full(m, -1)
    for i in range(n):
        if x[i] >= 0:
            y[x[i]] = i
    return big[r, c].sum(), x, y


try:
    import lap  # noqa: F401
    LAP = "lap"
except ImportError:
    sys.modules["lap"] = types.SimpleNamespace(lapjv=lapjv, __version__="stand-in")
    LAP = "a lapjv stand-in over scipy"

from ultralytics.trackers.bot_sort import BOTSORT as RefBOTSORT  # noqa: E402
from ultralytics.trackers.byte_tracker import BYTETracker as RefBYTETracker  # noqa: E402


class Dets:
    """The reference trackers' input: numpy boxes with conf, cls, xywh, xyxy and boolean indexing."""

    def __init__(self, a):
        self.data = np.asarray(a, dtype=np.float32).reshape(-1, 6)

    conf = property(lambda self: self.data[:, 4])
    cls = property(lambda self: self.data[:, 5])
    xyxy = property(lambda self: self.data[:, :4])

    @property
    def xywh(self):
        b = self.data[:, :4]
        return np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return Dets(self.data[i])


def reference_args(name, **changes):
    """The reference's shipped tracker YAML (bytetrack.yaml, botsort.yaml) as its trackers take it."""
    path = Path(sys.modules["ultralytics"].__file__).parent / "cfg" / "trackers" / name
    return SimpleNamespace(**{**yaml.safe_load(path.read_text()), **changes})


def reference_tracker(name, **changes):
    args = reference_args(name, **changes)
    return (RefBOTSORT if args.tracker_type == "botsort" else RefBYTETracker)(args)
