"""Tracking over a stream of prediction Results, as the reference's track mode: each frame's boxes go
to the tracker; the frame's Results then holds the confirmed tracks only, in the tracker's order,
with (n, 7) boxes [x1, y1, x2, y2, id, conf, cls] (the tracker's filtered box) and the masks of the
detections they were matched to. A frame whose tracks are all unconfirmed yet comes back empty; a
frame with no track at all comes back as predicted (is_track False), as the reference's does."""
import numpy as np
import torch

from . import TRACKER_MAP
from .config import load_tracker_config

# Options that write predict's own (untracked) drawings and labels: refused for tracking.
WRITING = ("save", "save_frames", "save_txt", "save_json", "save_crop")


class TrackSession:
    """One tracker over a YOLO object's track() calls: kept by persist=True, replaced otherwise."""

    def __init__(self, tracker="botsort.yaml"):
        self.cfg = load_tracker_config(tracker)
        self.tracker = TRACKER_MAP[self.cfg.tracker_type](self.cfg)
        self.path = None

    def _needs_image(self):
        gmc = getattr(self.tracker, "gmc", None)
        return gmc is not None and gmc.method is not None

    def __call__(self, result, persist=False):
        """The frame's Results with its tracks. Without persist, a new source path (the next video or
        image) restarts the tracker, ids from 1."""
        if not persist and self.path != result.path:
            self.tracker.reset()
            self.path = result.path
        data = result.boxes.data if result.boxes is not None else np.zeros((0, 6), np.float32)
        data = (data.cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)).astype(np.float32)
        dets = np.concatenate([data[:, :4], data[:, -2:]], 1) if len(data) else np.zeros((0, 6), np.float32)
        tracks = self.tracker.update(dets, result.orig_img if self._needs_image() else None)
        if len(tracks) == 0:
            if any(not t.is_activated for t in self.tracker.tracked_stracks):
                return result[:0]  # tracks are shown once confirmed
            return result
        tracked = result[tracks[:, -1].astype(int)]
        tracked.update(boxes=torch.as_tensor(tracks[:, :-1]))
        return tracked


def track_options(kwargs):
    """The predict options of a track() call: the reference's conf 0.1 when not given (the second
    association takes boxes down to track_low_thresh) and batch 1; writing options refused."""
    for key in WRITING:
        if kwargs.get(key) not in (None, False, "False", "false"):
            raise ValueError(f"track(): {key}={kwargs[key]} is not supported: predict's files would show untracked "
                             f"boxes; draw each frame's tracks with results[i].plot() or results[i].save()")
        kwargs.pop(key, None)
    kwargs["conf"] = 0.1 if kwargs.get("conf") is None else kwargs["conf"]
    kwargs["batch"] = kwargs.get("batch") or 1
    return kwargs
