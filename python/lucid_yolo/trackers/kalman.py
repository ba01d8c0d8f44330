"""Constant-velocity Kalman filters over a box, as ByteTrack (xyah: centre, aspect ratio w/h, height)
and BoT-SORT (xywh: centre, width, height) use them. The state is the 4 box numbers and their
velocities; the box is observed directly. Noise scales with the box's size (height for xyah, width
and height for xywh), with the weights of DeepSORT's filter that both trackers keep (1/20 of the size
for position, 1/160 for velocity), so a large box may move more pixels per frame than a small one."""
import numpy as np

POSITION_WEIGHT = 1.0 / 20
VELOCITY_WEIGHT = 1.0 / 160


class KalmanFilterXYAH:
    """Box (cx, cy, w/h, h). The aspect ratio is nearly constant for one object, hence its small
    fixed noise (1e-2 position, 1e-5 velocity, 1e-1 observed) instead of a size-scaled one."""

    # Velocities frozen while a track is lost: growth of the box is not extrapolated through a gap.
    lost_frozen = (7,)

    def __init__(self):
        self.motion = np.eye(8)
        self.motion[:4, 4:] = np.eye(4)  # one frame: position += velocity

    # -- noise: standard deviations from the state (or measurement) --------------------------------
    def _initial_std(self, m):
        h = m[3]
        return [2 * POSITION_WEIGHT * h, 2 * POSITION_WEIGHT * h, 1e-2, 2 * POSITION_WEIGHT * h,
                10 * VELOCITY_WEIGHT * h, 10 * VELOCITY_WEIGHT * h, 1e-5, 10 * VELOCITY_WEIGHT * h]

    def _process_std(self, means):
        """(n, 8) standard deviations of the motion noise for (n, 8) states."""
        h = means[:, 3]
        c = np.ones_like(h)
        return np.stack([POSITION_WEIGHT * h, POSITION_WEIGHT * h, 1e-2 * c, POSITION_WEIGHT * h,
                         VELOCITY_WEIGHT * h, VELOCITY_WEIGHT * h, 1e-5 * c, VELOCITY_WEIGHT * h], 1)

    def _measurement_std(self, mean):
        h = mean[3]
        return [POSITION_WEIGHT * h, POSITION_WEIGHT * h, 1e-1, POSITION_WEIGHT * h]

    # -- the box in the filter's form ---------------------------------------------------------------
    @staticmethod
    def from_tlwh(tlwh):
        """(left, top, w, h) to the measurement."""
        x, y, w, h = np.asarray(tlwh, dtype=np.float64)
        return np.array([x + w / 2, y + h / 2, w / h, h])

    @staticmethod
    def to_tlwh(state):
        cx, cy, a, h = state[:4]
        w = a * h
        return np.array([cx - w / 2, cy - h / 2, w, h])

    # -- the filter ---------------------------------------------------------------------------------
    def initiate(self, measurement):
        """A new track: the measured box, zero velocity."""
        m = np.asarray(measurement, dtype=np.float64)
        mean = np.concatenate([m, np.zeros(4)])
        return mean, np.diag(np.square(self._initial_std(m)))

    def predict(self, means, covariances):
        """One frame ahead for (n, 8) means and (n, 8, 8) covariances."""
        q = np.square(self._process_std(means))
        means = means @ self.motion.T
        covariances = self.motion @ covariances @ self.motion.T
        covariances[:, np.arange(8), np.arange(8)] += q
        return means, covariances

    def update(self, mean, covariance, measurement):
        """The state corrected by a measured box."""
        s = covariance[:4, :4] + np.diag(np.square(self._measurement_std(mean)))
        gain = np.linalg.solve(s, covariance[:4, :].copy()).T  # P H^T S^-1 (S symmetric)
        mean = mean + gain @ (np.asarray(measurement, dtype=np.float64) - mean[:4])
        covariance = covariance - gain @ s @ gain.T
        return mean, covariance


class KalmanFilterXYWH(KalmanFilterXYAH):
    """Box (cx, cy, w, h): width and height each scale their own noise (BoT-SORT), which follows
    boxes whose aspect ratio changes better than xyah."""

    lost_frozen = (6, 7)

    def _initial_std(self, m):
        w, h = m[2], m[3]
        p, v = 2 * POSITION_WEIGHT, 10 * VELOCITY_WEIGHT
        return [p * w, p * h, p * w, p * h, v * w, v * h, v * w, v * h]

    def _process_std(self, means):
        w, h = means[:, 2], means[:, 3]
        p, v = POSITION_WEIGHT, VELOCITY_WEIGHT
        return np.stack([p * w, p * h, p * w, p * h, v * w, v * h, v * w, v * h], 1)

    def _measurement_std(self, mean):
        w, h = mean[2], mean[3]
        return [POSITION_WEIGHT * w, POSITION_WEIGHT * h, POSITION_WEIGHT * w, POSITION_WEIGHT * h]

    @staticmethod
    def from_tlwh(tlwh):
        x, y, w, h = np.asarray(tlwh, dtype=np.float64)
        return np.array([x + w / 2, y + h / 2, w, h])

    @staticmethod
    def to_tlwh(state):
        cx, cy, w, h = state[:4]
        return np.array([cx - w / 2, cy - h / 2, w, h])
