"""BoT-SORT (Aharon et al., 2022), motion only: ByteTrack's association with a Kalman filter over
(cx, cy, w, h) instead of (cx, cy, aspect, h), and the tracks' predicted states moved by the
camera's motion (gmc.py) before they are paired. The appearance (ReID) cue of the paper is not
implemented: with_reid must be False."""
import warnings

import numpy as np

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
        """dets: the frame's confident detections, which ORB and SIFT keep their keypoints out of."""
        if self.gmc.method is None or img is None:
            return
        try:
            warp = self.gmc.apply(img, dets)
        except Exception as e:  # a failed estimate costs the frame its compensation, not the tracking
            warnings.warn(f"gmc_method: {self.gmc.method} failed on frame {self.frame_id} ({e}); no compensation "
                          "on this frame", stacklevel=2)
            warp = np.eye(2, 3)
        warp_states(tracks, warp)
