"""Camera motion compensation for BoT-SORT (global motion compensation, GMC): the frame-to-frame
motion of the background as a 2x3 transform, applied to the tracks' predicted states so a panning
camera does not read as every object moving. The methods are the reference's ``gmc_method`` values,
each on the grey frame downscaled by 2:

- ``sparseOptFlow`` (BoT-SORT's choice): Shi-Tomasi corners followed into the next frame by
  pyramidal Lucas-Kanade optical flow;
- ``orb``: FAST corners (threshold 20) with ORB descriptors, matched by Hamming distance;
- ``sift``: SIFT keypoints and descriptors (3 layers per octave, contrast 0.02, edge 20), matched by
  L2 distance;
- ``ecc``: the Euclidean transform (rotation and translation) maximising the enhanced correlation
  coefficient between the two frames (at most 5000 iterations or a step below 1e-6), on frames
  blurred before downscaling;
- ``none``: no compensation.

The point methods fit a rotation, uniform scale and translation to their point pairs with RANSAC.
ORB and SIFT look for keypoints away from the frame's border and outside the frame's confident
detections (moving objects), and keep a match when it passes the ratio test (best distance < 0.9 x
second best), moved less than a quarter of the frame, and moved within 2.5 standard deviations of
the matches' mean motion. All of them need OpenCV (cv2); without it BoT-SORT runs with no
compensation and says so once."""
import warnings

import numpy as np

METHODS = ("sparseOptFlow", "orb", "sift", "ecc", "none")

# Corner detection: many corners over-determine the 4 parameters; quality 1% of the best corner.
CORNERS = {"maxCorners": 400, "qualityLevel": 0.01, "minDistance": 0, "blockSize": 3,
           "useHarrisDetector": False, "k": 0.04}
SIFT = {"nOctaveLayers": 3, "contrastThreshold": 0.02, "edgeThreshold": 20}
ECC_ITERATIONS, ECC_EPS = 5000, 1e-6
RATIO = 0.9  # Lowe's ratio test: the best match clearly better than the second
MAX_SHIFT = 0.25  # of the frame's width and height: a farther match is a mismatch
SPREAD = 2.5  # standard deviations of the matches' motion kept
BORDER = 0.02  # of each side: keypoints on the frame's edge come and go with the motion


def _cv2():
    try:
        import cv2
        return cv2
    except ImportError:
        return None


class GMC:
    """Per-video state: the previous (downscaled, grey) frame and its keypoints or descriptors."""

    def __init__(self, method="sparseOptFlow", downscale=2):
        if method in (None, "none", "None"):
            method = None
        elif method not in METHODS:
            raise ValueError(f"gmc_method: {method!r} is not one of the camera motion compensations "
                             f"({', '.join(METHODS)})")
        self.cv2 = _cv2() if method else None
        if method and self.cv2 is None:
            warnings.warn(f"gmc_method: {method} needs OpenCV (pip install opencv-python), which is not installed; "
                          "BoT-SORT runs without camera motion compensation (as gmc_method: none)", stacklevel=3)
            method = None
        self.method = method
        self.downscale = max(1, int(downscale))
        cv2 = self.cv2
        if method == "orb":
            self.detector, self.extractor = cv2.FastFeatureDetector_create(20), cv2.ORB_create()
            self.matcher = cv2.BFMatcher(cv2.NORM_HAMMING)
        elif method == "sift":
            self.detector = self.extractor = cv2.SIFT_create(**SIFT)
            self.matcher = cv2.BFMatcher(cv2.NORM_L2)
        self.reset()

    def reset(self):
        self.previous = self.points = self.descriptors = None
        self.started = False

    def apply(self, img, boxes=None):
        """The 2x3 transform from the previous frame to this BGR frame (identity on the first).
        boxes: the frame's confident detections, (n, >=4) [x1, y1, x2, y2, ...], which ORB and SIFT
        keep their keypoints out of."""
        if self.method is None or img is None:
            return np.eye(2, 3)
        cv2 = self.cv2
        grey = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if img.ndim == 3 and img.shape[2] == 3 else img
        if self.method == "ecc":
            return self._ecc(grey)
        h, w = grey.shape[:2]
        if self.downscale > 1:
            grey = cv2.resize(grey, (w // self.downscale, h // self.downscale))
        if self.method == "sparseOptFlow":
            return self._optical_flow(grey)
        return self._features(grey, boxes)

    def _similarity(self, prev, curr):
        """RANSAC's rotation, scale and translation from prev to curr points (identity for 4 pairs
        or fewer, or a degenerate set), its translation at full resolution."""
        if len(prev) <= 4:
            return np.eye(2, 3)
        fitted = self.cv2.estimateAffinePartial2D(prev, curr, self.cv2.RANSAC)[0]
        if fitted is None:
            return np.eye(2, 3)
        if self.downscale > 1:
            fitted[:, 2] *= self.downscale
        return fitted

    def _optical_flow(self, grey):
        cv2 = self.cv2
        corners = cv2.goodFeaturesToTrack(grey, mask=None, **CORNERS)
        warp = np.eye(2, 3)
        if self.previous is not None and self.points is not None:
            moved, status, _ = cv2.calcOpticalFlowPyrLK(self.previous, grey, self.points, None)
            good = status.ravel().astype(bool)
            warp = self._similarity(self.points[good], moved[good])
        self.previous, self.points = grey, corners
        return warp

    def _features(self, grey, boxes):
        h, w = grey.shape
        mask = np.zeros_like(grey)
        mask[int(BORDER * h):int((1 - BORDER) * h), int(BORDER * w):int((1 - BORDER) * w)] = 255
        if boxes is not None and len(boxes):
            # Truncated toward zero after the float32 division, as the reference cuts the boxes out.
            for x1, y1, x2, y2 in (np.asarray(boxes)[:, :4] / self.downscale).astype(np.int_):
                mask[y1:y2, x1:x2] = 0
        points, descriptors = self.extractor.compute(grey, self.detector.detect(grey, mask))
        warp = np.eye(2, 3)
        if self.started:
            warp = self._similarity(*self._matched_points(points, descriptors, w, h))
        self.started = True
        self.previous, self.points, self.descriptors = grey, points, descriptors
        return warp

    def _matched_points(self, points, descriptors, w, h):
        """(previous, current) (k, 2) locations of the matches that pass the ratio, distance and
        spread tests."""
        pairs = []
        if self.descriptors is not None and descriptors is not None:
            for m in self.matcher.knnMatch(self.descriptors, descriptors, 2):
                if len(m) == 2 and m[0].distance < RATIO * m[1].distance:
                    p, q = self.points[m[0].queryIdx].pt, points[m[0].trainIdx].pt
                    if abs(p[0] - q[0]) < MAX_SHIFT * w and abs(p[1] - q[1]) < MAX_SHIFT * h:
                        pairs.append((*p, *q))
        pairs = np.asarray(pairs, dtype=np.float64).reshape(-1, 4)
        shift = pairs[:, :2] - pairs[:, 2:]
        if len(pairs):
            # <=: a spread of zero (every match moved alike) keeps them all.
            pairs = pairs[(np.abs(shift - shift.mean(0)) <= SPREAD * shift.std(0)).all(1)]
        return np.ascontiguousarray(pairs[:, :2]), np.ascontiguousarray(pairs[:, 2:])

    def _ecc(self, grey):
        cv2 = self.cv2
        h, w = grey.shape[:2]
        if self.downscale > 1:
            grey = cv2.resize(cv2.GaussianBlur(grey, (3, 3), 1.5), (w // self.downscale, h // self.downscale))
        warp = np.eye(2, 3, dtype=np.float32)
        if self.previous is not None:
            criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, ECC_ITERATIONS, ECC_EPS)
            try:
                warp = cv2.findTransformECC(self.previous, grey, warp, cv2.MOTION_EUCLIDEAN, criteria, None, 1)[1]
                warp[:, 2] *= (w / grey.shape[1], h / grey.shape[0])  # the translation at full resolution
            except cv2.error as e:  # no convergence (e.g. a cut between unrelated frames)
                # OpenCV iterates on `warp` in place: the frame keeps the estimate where it stopped, at the
                # downscaled resolution, as the reference's does.
                warnings.warn(f"gmc_method: ecc did not converge ({getattr(e, 'err', e)}); the frame "
                              "keeps the estimate where it stopped", stacklevel=3)
        self.previous = grey
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
