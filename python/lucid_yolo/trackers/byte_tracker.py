"""ByteTrack (Zhang et al., 2022): every detection box takes part in the association, the confident
ones first. Tracks are boxes under a Kalman filter; each frame:

1. tracked and lost tracks are predicted one frame ahead;
2. they are paired with the high-score detections (score >= track_high_thresh) by IoU, fused with
   the detection's score when fuse_score is set, pairs costing less than match_thresh;
3. the tracked ones left over are paired with the low-score detections (track_low_thresh < score <
   track_high_thresh) by IoU alone (cost below 0.5): occluded or blurred objects keep their track,
   and low-score boxes never start one; tracked ones still unpaired become lost;
4. tracks born on the previous frame (unconfirmed) are paired with the remaining high-score
   detections (cost below 0.7) and confirmed, or removed;
5. remaining detections scoring new_track_thresh or more start tracks (confirmed at once on the
   first frame only); lost tracks unseen for more than track_buffer frames are removed.

Output rows are [x1, y1, x2, y2, track_id, score, cls, idx]: the filtered box, the id, the matched
detection's score and class, and that detection's index in the frame's input."""
import numpy as np

from . import matching
from .kalman import KalmanFilterXYAH

NEW, TRACKED, LOST, REMOVED = range(4)
REMOVED_KEPT = 1000  # removed tracks remembered, so that a late duplicate is not kept as lost


class Track:
    """One object: its box under the filter, id, state, last score and class."""

    def __init__(self, tlwh, score, cls, idx):
        self.det_tlwh = np.asarray(tlwh, dtype=np.float32)
        self.score, self.cls, self.idx = score, cls, idx
        self.mean = self.covariance = self.kalman = None
        self.track_id = 0
        self.state = NEW
        self.is_activated = False
        self.frame_id = self.start_frame = self.tracklet_len = 0

    @property
    def tlwh(self):
        return self.det_tlwh.copy() if self.mean is None else self.kalman.to_tlwh(self.mean)

    @property
    def xyxy(self):
        x, y, w, h = self.tlwh
        return np.array([x, y, x + w, y + h])

    def activate(self, kalman, frame_id, track_id):
        self.kalman = kalman
        self.track_id = track_id
        self.mean, self.covariance = kalman.initiate(kalman.from_tlwh(self.det_tlwh))
        self.tracklet_len = 0
        self.state = TRACKED
        self.is_activated = frame_id == 1  # later births wait for a second sighting
        self.frame_id = self.start_frame = frame_id

    def update(self, det, frame_id, refound=False):
        """Corrected by its matched detection `det` (a Track not yet activated)."""
        self.mean, self.covariance = self.kalman.update(self.mean, self.covariance, self.kalman.from_tlwh(det.det_tlwh))
        self.tracklet_len = 0 if refound else self.tracklet_len + 1
        self.state = TRACKED
        self.is_activated = True
        self.frame_id = frame_id
        self.score, self.cls, self.idx = det.score, det.cls, det.idx

    @property
    def result(self):
        return [*self.xyxy.tolist(), self.track_id, self.score, self.cls, self.idx]


def _joint(a, b):
    """a, then the tracks of b whose id is not in a."""
    ids = {t.track_id for t in a}
    return a + [t for t in b if t.track_id not in ids]


def _without(a, b):
    ids = {t.track_id for t in b}
    return [t for t in a if t.track_id not in ids]


def _drop_duplicates(tracked, lost):
    """A tracked and a lost track on the same box (IoU > 0.85) are one object: keep the older."""
    close = np.argwhere(matching.iou_distance(tracked, lost) < 0.15)
    drop_tracked, drop_lost = set(), set()
    for p, q in close:
        if tracked[p].frame_id - tracked[p].start_frame > lost[q].frame_id - lost[q].start_frame:
            drop_lost.add(q)
        else:
            drop_tracked.add(p)
    return ([t for i, t in enumerate(tracked) if i not in drop_tracked],
            [t for i, t in enumerate(lost) if i not in drop_lost])


def detections_array(dets):
    """(n, 6) float32 [x1, y1, x2, y2, conf, cls] from such an array or from boxes with xyxy, conf
    and cls (lucid_yolo's or the reference's Boxes, torch or numpy)."""
    if hasattr(dets, "xyxy") and hasattr(dets, "conf"):
        cols = [dets.xyxy, dets.conf[:, None], dets.cls[:, None]]
        cols = [c.cpu().numpy() if hasattr(c, "cpu") else np.asarray(c) for c in cols]
        return np.concatenate(cols, 1).astype(np.float32).reshape(-1, 6)
    a = np.asarray(dets, dtype=np.float32)
    if a.size == 0:
        return a.reshape(0, 6)
    if a.ndim != 2 or a.shape[1] < 6:
        raise ValueError(f"tracker update(): detections should be (n, 6) [x1, y1, x2, y2, conf, cls]; got {a.shape}")
    return a[:, :6]


class BYTETracker:
    """Multi-object tracking by ByteTrack over one video. ``args`` has the tracker YAML's keys
    (lucid_yolo.trackers.load_tracker_config)."""

    def __init__(self, args, frame_rate=30):
        self.args = args
        self.max_frames_lost = args.track_buffer
        self.reset()

    def kalman_filter(self):
        return KalmanFilterXYAH()

    def reset(self):
        """Forgets every track and restarts ids at 1 (a new video)."""
        self.tracked_stracks, self.lost_stracks, self.removed_stracks = [], [], []
        self.frame_id = 0
        self.kalman = self.kalman_filter()
        self._last_id = 0

    def _next_id(self):
        self._last_id += 1
        return self._last_id

    def _tracks(self, dets, keep):
        idx = np.flatnonzero(keep)
        return [Track((x1, y1, x2 - x1, y2 - y1), s, c, int(i))
                for i, (x1, y1, x2, y2, s, c) in zip(idx, dets[idx].tolist())]

    def distances(self, tracks, detections):
        cost = matching.iou_distance(tracks, detections)
        return matching.fuse_score(cost, detections) if self.args.fuse_score else cost

    def predict(self, tracks):
        if not tracks:
            return
        means = np.array([t.mean for t in tracks])
        for k, t in enumerate(tracks):
            if t.state != TRACKED:
                means[k, list(self.kalman.lost_frozen)] = 0
        means, covs = self.kalman.predict(means, np.array([t.covariance for t in tracks]))
        for t, m, c in zip(tracks, means, covs):
            t.mean, t.covariance = m, c

    def compensate(self, img, dets, tracks):
        """Camera motion compensation before association: none in ByteTrack (BoT-SORT's)."""

    def update(self, dets, img=None):
        """One frame's detections ((n, 6) [x1, y1, x2, y2, conf, cls] or Boxes) and its image (BGR,
        for camera motion compensation); returns the confirmed tracks as (k, 8) float32 rows."""
        dets = detections_array(dets)
        self.frame_id += 1
        a = self.args
        w, h, scores = dets[:, 2] - dets[:, 0], dets[:, 3] - dets[:, 1], dets[:, 4]
        valid = (w > 0) & (h > 0)  # an empty box has no aspect ratio to filter
        high = valid & (scores >= a.track_high_thresh)
        low = valid & (scores > a.track_low_thresh) & (scores < a.track_high_thresh)
        detections, second = self._tracks(dets, high), self._tracks(dets, low)
        unconfirmed = [t for t in self.tracked_stracks if not t.is_activated]
        pool = _joint([t for t in self.tracked_stracks if t.is_activated], self.lost_stracks)
        self.predict(pool)
        self.compensate(img, dets[high], pool + unconfirmed)
        activated, refound, lost, removed = [], [], [], []

        def pair(tracks, dets_, cost, thresh):
            matches, u_tracks, u_dets = matching.linear_assignment(cost, thresh)
            for it, idet in matches:
                t = tracks[it]
                (activated if t.state == TRACKED else refound).append(t)
                t.update(dets_[idet], self.frame_id, refound=t.state != TRACKED)
            return u_tracks, u_dets

        u_pool, u_dets = pair(pool, detections, self.distances(pool, detections), a.match_thresh)
        remaining = [pool[i] for i in u_pool if pool[i].state == TRACKED]
        u_remaining, _ = pair(remaining, second, matching.iou_distance(remaining, second), 0.5)
        for i in u_remaining:
            remaining[i].state = LOST
            lost.append(remaining[i])

        left = [detections[i] for i in u_dets]
        u_unconfirmed, u_left = pair(unconfirmed, left, self.distances(unconfirmed, left), 0.7)
        for i in u_unconfirmed:
            unconfirmed[i].state = REMOVED
            removed.append(unconfirmed[i])
        for i in u_left:
            if left[i].score >= a.new_track_thresh:
                left[i].activate(self.kalman, self.frame_id, self._next_id())
                activated.append(left[i])
        for t in self.lost_stracks:
            if self.frame_id - t.frame_id > self.max_frames_lost:
                t.state = REMOVED
                removed.append(t)
        self._merge(activated, refound, lost, removed)
        rows = [t.result for t in self.tracked_stracks if t.is_activated]
        return np.asarray(rows, dtype=np.float32).reshape(-1, 8)

    def _merge(self, activated, refound, lost, removed):
        """The frame's changes into the pools. A lost track removed this frame leaves the lost pool
        on the next frame only (ByteTrack's order of bookkeeping, which the reference keeps too)."""
        tracked = [t for t in self.tracked_stracks if t.state == TRACKED]
        self.tracked_stracks = _joint(_joint(tracked, activated), refound)
        self.lost_stracks = _without(_without(self.lost_stracks, self.tracked_stracks) + lost, self.removed_stracks)
        self.tracked_stracks, self.lost_stracks = _drop_duplicates(self.tracked_stracks, self.lost_stracks)
        self.removed_stracks = (self.removed_stracks + removed)[-REMOVED_KEPT:]
