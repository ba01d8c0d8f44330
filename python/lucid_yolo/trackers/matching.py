"""Association costs and the assignment that pairs tracks with detections.

``linear_assignment(cost, thresh)`` pairs rows with columns to minimise the sum of (cost - thresh)
over the pairs made, so a pair is made only where its cost is below thresh and a contested detection
goes to the pairing that is best overall. That is what the reference gets from lap.lapjv with
``cost_limit=thresh`` (leaving a row or a column unpaired costs thresh / 2), rather than a complete
assignment whose costly pairs are dropped afterwards, which can leave a row unpaired that had a cheap
column to take. The solver is scipy's when scipy is installed, else the shortest augmenting path
below (the same algorithm, Jonker-Volgenant as in Crouse 2016), in numpy."""
import numpy as np

try:
    from scipy.optimize import linear_sum_assignment as _scipy_lsa
except ImportError:  # the package does not depend on scipy
    _scipy_lsa = None

# Set False to use the numpy solver where scipy is installed (the tests compare the two).
USE_SCIPY = True


def _augment(cost, row, u, v, col4row, row4col):
    """Assigns `row` along the shortest augmenting path in the reduced costs; updates the duals."""
    n, m = cost.shape
    shortest = np.full(m, np.inf)
    path = np.full(m, -1)
    seen_rows = np.zeros(n, dtype=bool)
    seen_cols = np.zeros(m, dtype=bool)
    i, low, sink = row, 0.0, -1
    while sink < 0:
        seen_rows[i] = True
        reduced = low + cost[i] - u[i] - v
        better = ~seen_cols & (reduced < shortest)
        path[better] = i
        shortest[better] = reduced[better]
        open_cols = np.flatnonzero(~seen_cols)
        low = shortest[open_cols].min()
        if not np.isfinite(low):
            raise ValueError("cost matrix is infeasible")
        ties = open_cols[shortest[open_cols] == low]
        free = ties[row4col[ties] < 0]
        j = free[0] if len(free) else ties[0]  # an unassigned column ends the path now
        seen_cols[j] = True
        if row4col[j] < 0:
            sink = j
        else:
            i = row4col[j]
    u[row] += low
    others = seen_rows.copy()
    others[row] = False
    u[others] += low - shortest[col4row[others]]
    v[seen_cols] -= low - shortest[seen_cols]
    j = sink
    while True:  # flip the path: each row on it takes the next column
        i = path[j]
        row4col[j] = i
        col4row[i], j = j, col4row[i]
        if i == row:
            break


def linear_sum_assignment(cost):
    """Minimum-cost complete assignment of min(n, m) pairs: (rows ascending, their columns)."""
    cost = np.asarray(cost, dtype=np.float64)
    if _scipy_lsa is not None and USE_SCIPY:
        return _scipy_lsa(cost)
    transposed = cost.shape[0] > cost.shape[1]
    if transposed:
        cost = cost.T
    n, m = cost.shape
    u, v = np.zeros(n), np.zeros(m)
    col4row, row4col = np.full(n, -1), np.full(m, -1)
    for row in range(n):
        _augment(cost, row, u, v, col4row, row4col)
    if transposed:
        order = np.argsort(col4row)
        return col4row[order], np.arange(n)[order]
    return np.arange(n), col4row


def linear_assignment(cost, thresh):
    """(matches (k, 2) of row, column ascending by row, unmatched rows, unmatched columns) pairing
    only where cost < thresh, minimising the sum of (cost - thresh) over the pairs made."""
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    gain = np.minimum(cost - thresh, 0.0)  # a pair at or above thresh is worth no more than none
    rows = np.flatnonzero((gain < 0).any(1))
    cols = np.flatnonzero((gain < 0).any(0))
    matches = np.empty((0, 2), dtype=int)
    if len(rows):
        r, c = linear_sum_assignment(gain[np.ix_(rows, cols)])
        keep = gain[rows[r], cols[c]] < 0
        matches = np.stack([rows[r[keep]], cols[c[keep]]], 1)
        matches = matches[np.argsort(matches[:, 0], kind="stable")]
    unmatched_rows = np.setdiff1d(np.arange(n), matches[:, 0])
    unmatched_cols = np.setdiff1d(np.arange(m), matches[:, 1])
    return matches, unmatched_rows, unmatched_cols


def box_iou(a, b, eps=1e-7):
    """(n, m) IoU of xyxy boxes a (n, 4) and b (m, 4), in float32 as the detections are."""
    a = np.asarray(a, dtype=np.float32).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float32).reshape(-1, 4)
    iw = (np.minimum(a[:, None, 2], b[:, 2]) - np.maximum(a[:, None, 0], b[:, 0])).clip(0)
    ih = (np.minimum(a[:, None, 3], b[:, 3]) - np.maximum(a[:, None, 1], b[:, 1])).clip(0)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b - inter + eps)


def iou_distance(tracks, detections):
    """1 - IoU between the tracks' predicted boxes and the detections' boxes."""
    if not tracks or not detections:
        return np.zeros((len(tracks), len(detections)), dtype=np.float32)
    return 1 - box_iou([t.xyxy for t in tracks], [d.xyxy for d in detections])


def fuse_score(cost, detections):
    """IoU weighted by the detection's score (1 - IoU * score): among overlapping detections, the
    confident one is the cheaper match."""
    if cost.size == 0:
        return cost
    scores = np.array([d.score for d in detections], dtype=np.float32)
    return 1 - (1 - cost) * scores[None, :]
