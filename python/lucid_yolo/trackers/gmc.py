"""Camera motion compensation for BoT-SORT (global motion compensation, GMC): the frame-to-frame
motion of the background as a 2x3 similarity transform, applied to the tracks' predicted states so a
panning camera does not read as every object moving.

``sparseOptFlow`` (BoT-SORT's choice): corners of the frame at half resolution (Shi-Tomasi), followed
into the next frame by pyramidal Lucas-Kanade optical flow, and a RANSAC fit of a rotation, uniform
scale and translation to the pairs. It needs OpenCV (cv2); without it BoT-SORT runs with no
compensation and says so once. ``none`` turns it off. The reference's ``orb``, ``sift`` and ``ecc``
are not implemented (an error names gmc_method)."""
import warnings

import numpy as np

METHODS = ("sparseOptFlow", "none")

# Corner detection: many corners over-determine the 4 parameters; quality 1% of the best corner.
CORNERS = {"maxCorners": 400, "qualityLevel": 0.01, "minDistance": 0, "blockSize": 3,
           "useHarrisDetector": False, "k": 0.04}


def _cv2():
    try:
        import cv2
        return cv2
    except ImportError:
        return None


class GMC:
    """Per-video state: the previous (downscaled, grey) frame and its corners."""

    def __init__(self, method="sparseOptFlow", downscale=2):
        if method in (None, "none", "None"):
            method = None
        elif method not in METHODS:
            raise ValueError(f"gmc_method: {method!r} is not one of lucid's camera motion compensations "
                             f"({', '.join(METHODS)}); the reference's orb, sift and ecc are not implemented")
        self.cv2 = _cv2() if method else None
        if method and self.cv2 is None:
            warnings.warn(f"gmc_method: {method} needs OpenCV (pip install opencv-python), which is not installed; "
                          "BoT-SORT runs without camera motion compensation (as gmc_method: none)", stacklevel=3)
            method = None
        self.method = method
        self.downscale = max(1, int(downscale))
        self.reset()

    def reset(self):
        self.previous = None
        self.corners = None

    def apply(self, img):
        """The 2x3 transform from the previous frame to this BGR frame (identity on the first)."""
        if self.method is None or img is None:
            return np.eye(2, 3)
        cv2 = self.cv2
        h, w = img.shape[:2]
        grey = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if img.ndim == 3 and img.shape[2] == 3 else img
        if self.downscale > 1:
            grey = cv2.resize(grey, (w // self.downscale, h // self.downscale))
        corners = cv2.goodFeaturesToTrack(grey, mask=None, **CORNERS)
        warp = np.eye(2, 3)
        if self.previous is not None and self.corners is not None:
            moved, status, _ = cv2.calcOpticalFlowPyrLK(self.previous, grey, self.corners, None)
            good = status.ravel().astype(bool)
            if good.sum() > 4:
                fitted = cv2.estimateAffinePartial2D(self.corners[good], moved[good], cv2.RANSAC)[0]
                if fitted is not None:
                    warp = fitted
                    warp[:, 2] *= self.downscale  # the translation at full resolution
        self.previous, self.corners = grey, corners
        return warp


def warp_states(tracks, warp):
    """Moves (cx, cy, w, h, velocities) Kalman states by a 2x3 similarity transform: centres and
    their velocities rotate and scale with it, the centre is translated, and the box sizes follow the
    absolute rotation (the box enclosing the turned box), never changing sign."""
    if not tracks:
        return
    r = warp[:2, :2]
    big = np.kron(np.eye(4), r)
    big[2:4, 2:4] = big[6:8, 6:8] = np.abs(r)
    means = np.array([t.mean for t in tracks]) @ big.T
    means[:, :2] += warp[:2, 2]
    covs = big @ np.array([t.covariance for t in tracks]) @ big.T
    for t, m, c in zip(tracks, means, covs):
        t.mean, t.covariance = m, c
