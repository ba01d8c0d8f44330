"""Multi-object tracking over predictions (``YOLO.track``, ``lucid track``): ByteTrack and BoT-SORT
(motion only), configured by the reference's tracker YAMLs. The trackers take (n, 6) detections
[x1, y1, x2, y2, conf, cls] per frame and use numpy only (scipy and OpenCV when installed)."""
from .bot_sort import BOTSORT
from .byte_tracker import BYTETracker
from .config import load_tracker_config

TRACKER_MAP = {"bytetrack": BYTETracker, "botsort": BOTSORT}


def make_tracker(tracker="botsort.yaml"):
    """A tracker from a YAML path or a shipped file's name (bytetrack.yaml, botsort.yaml)."""
    cfg = load_tracker_config(tracker)
    return TRACKER_MAP[cfg.tracker_type](cfg)


__all__ = ["BYTETracker", "BOTSORT", "TRACKER_MAP", "load_tracker_config", "make_tracker"]
