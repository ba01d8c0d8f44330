"""BoT-SORT (Aharon et al., 2022), motion only: ByteTrack's association with a Kalman filter over
(cx, cy, w, h) instead of (cx, cy, aspect, h), and the tracks' predicted states moved by the
camera's motion (gmc.py) before they are paired. The appearance (ReID) cue of the paper is not
implemented: with_reid must be False."""
from .byte_tracker import BYTETracker
from .gmc import GMC, warp_states
from .kalman import KalmanFilterXYWH


class BOTSORT(BYTETracker):

    def __init__(self, args, frame_rate=30):
        if getattr(args, "with_reid", False):
            raise ValueError("with_reid: True: lucid's BoT-SORT tracks by motion only (no ReID model); set with_reid: False")
        self.gmc = GMC(getattr(args, "gmc_method", "sparseOptFlow"))
        super().__init__(args, frame_rate)

    def kalman_filter(self):
        return KalmanFilterXYWH()

    def reset(self):
        super().reset()
        self.gmc.reset()

    def compensate(self, img, dets, tracks):
        if self.gmc.method is not None and img is not None:
            warp_states(tracks, self.gmc.apply(img))
