"""A synthetic moving-shapes video for the tracking tests: coloured shapes moving linearly over a
textured background (corners for optical flow), two of them crossing, one hidden for some frames,
optionally under a panning camera; their ground-truth boxes; detections made from those boxes (jitter,
scores, low-score boxes while a shape is half hidden, missed ones, false positives); and the MOT
metrics of a tracker's output against the ground truth (CLEAR MOT: MOTA, ID switches, fragmentations)."""
import numpy as np

# (shape, colour BGR, start centre, velocity px/frame, half size (w/2, h/2), hidden frames [a, b))
SHAPES = [
    ("rect", (40, 40, 230), (40.0, 90.0), (4.0, 0.0), (18, 14), None),
    ("disc", (230, 120, 30), (280.0, 98.0), (-4.0, 0.0), (15, 15), None),  # crosses the rectangle
    ("tri", (40, 200, 40), (160.0, 20.0), (0.0, 2.5), (16, 16), (22, 30)),  # hidden for 8 frames
    ("ellipse", (200, 60, 200), (60.0, 200.0), (3.0, -1.0), (22, 12), None),
]


def _background(h, w, seed):
    rng = np.random.default_rng(seed)
    small = rng.integers(60, 200, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(small, 8, 0), 8, 1)[:h, :w])


def _draw(frame, kind, colour, centre, half):
    h, w = frame.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    dx, dy = (xx - centre[0]) / half[0], (yy - centre[1]) / half[1]
    if kind == "rect":
        inside = (np.abs(dx) <= 1) & (np.abs(dy) <= 1)
    elif kind == "tri":
        inside = (dy <= 1) & (dy >= -1) & (np.abs(dx) <= (dy + 1) / 2)
    else:
        inside = dx * dx + dy * dy <= 1
    frame[inside] = colour


def video(frames=48, size=(240, 320), pan=(0.0, 0.0), seed=0):
    """([BGR frames (h, w, 3) uint8], [per frame {object: xyxy}]); pan moves the camera (px/frame):
    the background and every shape shift by -pan per frame, whole pixels."""
    h, w = size
    margin = int(max(abs(pan[0]), abs(pan[1])) * frames) + 2
    world = _background(h + 2 * margin, w + 2 * margin, seed)
    images, truth = [], []
    for f in range(frames):
        ox, oy = int(round(pan[0] * f)), int(round(pan[1] * f))
        frame = world[margin + oy:margin + oy + h, margin + ox:margin + ox + w].copy()
        boxes = {}
        for k, (kind, colour, c0, v, half, hidden) in enumerate(SHAPES):
            if hidden and hidden[0] <= f < hidden[1]:
                continue
            cx, cy = c0[0] + v[0] * f - ox, c0[1] + v[1] * f - oy
            box = np.array([cx - half[0], cy - half[1], cx + half[0], cy + half[1]])
            if box[2] <= 0 or box[3] <= 0 or box[0] >= w or box[1] >= h:
                continue
            _draw(frame, kind, colour, (cx, cy), half)
            boxes[k] = np.clip(box, 0, [w, h, w, h])
        images.append(frame)
        truth.append(boxes)
    return images, truth


def panned_texture(frames=16, size=(240, 320), step=(-2.3, 1.4), degrees=0.3, cut=None, seed=0):
    """A camera moving over a smooth noise texture, for camera motion compensation: ([BGR frames],
    [per frame the true 2x3 warp from the previous frame to it]). Each step turns the view by
    +-degrees (alternating) about the image origin and shifts it by step px (sub-pixel). cut: the
    index of an unrelated frame of noise inserted there (its warp and the next one's are None)."""
    import cv2

    rng = np.random.default_rng(seed)
    h, w = size
    texture = cv2.GaussianBlur(cv2.resize(rng.integers(0, 256, (h // 2, w // 2, 3), dtype=np.uint8), (2 * w, 2 * h),
                                          interpolation=cv2.INTER_CUBIC), (0, 0), 1.0)
    view = np.array([[1.0, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]])  # the texture's centre region first
    images, warps = [], []
    for f in range(frames):
        move = np.eye(3)
        if f:
            a = np.deg2rad(degrees) * (1 if f % 2 else -1)
            move[:2] = [[np.cos(a), -np.sin(a), step[0]], [np.sin(a), np.cos(a), step[1]]]
        view = move @ view
        images.append(cv2.warpAffine(texture, view[:2], (w, h), flags=cv2.INTER_LINEAR))
        warps.append(move[:2] if f else np.eye(2, 3))
    if cut is not None:
        images.insert(cut, rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        warps[cut:cut + 1] = [None, None]
    return images, warps


def crowd(frames=60, objects=24, size=(240, 320), seed=7):
    """Ground truth only (no frames): many boxes in random linear motion, each visible for a random
    span of frames, crowding the association (births, deaths, contested detections)."""
    rng = np.random.default_rng(seed)
    h, w = size
    spans = rng.integers(0, frames, (objects, 2))
    truth = [{} for _ in range(frames)]
    for k in range(objects):
        c, v = rng.uniform([0, 0], [w, h]), rng.uniform(-4, 4, 2)
        half = rng.uniform(8, 30, 2)
        for f in range(min(spans[k]), max(spans[k]) + 1):
            cx, cy = c + v * f
            box = np.clip([cx - half[0], cy - half[1], cx + half[0], cy + half[1]], 0, [w, h, w, h])
            if box[2] - box[0] > 2 and box[3] - box[1] > 2:
                truth[f][k] = box
    return truth


def _overlap(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return iw * ih / max(1e-9, (a[2] - a[0]) * (a[3] - a[1]))


def detections(truth, size=(240, 320), seed=1):
    """(per frame an (n, 6) float32 array [x1, y1, x2, y2, conf, cls], the number of truth boxes
    missed): each shape's box jittered
    (sigma 1 px) with a score of 0.5-0.95, a low score (0.12-0.24) while another shape covers more
    than 30% of it, missed at random (5%); and a false positive on some frames, scored 0.05-0.4."""
    rng = np.random.default_rng(seed)
    h, w = size
    out, missed = [], 0
    for boxes in truth:
        rows = []
        for k, box in boxes.items():
            if rng.random() < 0.05:
                missed += 1
                continue
            covered = max((_overlap(box, b) for j, b in boxes.items() if j != k), default=0.0)
            score = rng.uniform(0.12, 0.24) if covered > 0.3 and k == 0 else rng.uniform(0.5, 0.95)
            jit = np.clip(box + rng.normal(0, 1.0, 4), 0, [w, h, w, h])
            rows.append([*jit, score, k % 2])
        if rng.random() < 0.3:
            x, y = rng.uniform(0, w - 30), rng.uniform(0, h - 30)
            rows.append([x, y, x + rng.uniform(8, 30), y + rng.uniform(8, 30), rng.uniform(0.05, 0.4), 1])
        out.append(np.array(rows, dtype=np.float32).reshape(-1, 6))
    return out, missed


def mot_metrics(truth, tracked, iou_min=0.5):
    """CLEAR MOT of a tracker's output (per frame (k, >=5) rows [x1, y1, x2, y2, id, ...]) against the
    ground truth: a truth object and an output box match at IoU >= iou_min (a match kept from the
    previous frame first, then the best IoU, greedily); an ID switch is a truth object matched to
    another id than at its last match; a fragmentation a truth trajectory matched again after
    frames unmatched while it was visible; ids the track ids each truth object was matched to. MOTA = 1 - (misses + false positives + switches) / truth boxes."""
    last_id, was_matched, ids = {}, {}, {}
    gt = misses = fps = switches = frags = 0
    for boxes, rows in zip(truth, tracked):
        rows = np.asarray(rows, dtype=np.float64)
        rows = rows.reshape(0, 5) if rows.size == 0 else rows
        free = set(range(len(rows)))
        matched = {}
        pairs = sorted(((-_iou(b, rows[j, :4]), k, j) for k, b in boxes.items() for j in range(len(rows))))
        for k, b in boxes.items():  # keep last frame's pairing where it still overlaps enough
            for j in list(free):
                if last_id.get(k) == int(rows[j, 4]) and _iou(b, rows[j, :4]) >= iou_min:
                    matched[k] = j
                    free.discard(j)
                    break
        for neg, k, j in pairs:
            if -neg >= iou_min and k not in matched and j in free:
                matched[k] = j
                free.discard(j)
        gt += len(boxes)
        misses += len(boxes) - len(matched)
        fps += len(free)
        for k in boxes:
            if k in matched:
                tid = int(rows[matched[k], 4])
                switches += k in last_id and last_id[k] != tid
                frags += was_matched.get(k) is False
                last_id[k] = tid
                ids.setdefault(k, set()).add(tid)
                was_matched[k] = True
            elif k in was_matched:
                was_matched[k] = False
    return {"MOTA": 1 - (misses + fps + switches) / max(gt, 1), "IDSW": switches, "FRAG": frags,
            "FN": misses, "FP": fps, "GT": gt, "ids": {k: sorted(v) for k, v in sorted(ids.items())}}


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / max(1e-9, (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
