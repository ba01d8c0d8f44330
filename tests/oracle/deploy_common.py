"""What the export oracle tests share: a small trained model, the reference letterbox, lucid's
network outputs on given inputs (deploy_oracle_tool), comparisons of export-layout outputs, and
per-image pairing of `lucid predict` detections (predictions.json) with another predictor's."""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from pycocotools import mask as mask_utils
from safetensors.torch import load_file, save_file

from oracle_common import BUILD_DIR, Comparison, run

LUCID = BUILD_DIR / "lucid"
TOOL = BUILD_DIR / "tests" / "deploy_oracle_tool"
TRAIN_IMGSZ = 128


def train_small(tmp, model="yolo26n-seg.yaml"):
    """A 2-epoch `lucid train` of `model` on the synthetic set at imgsz 128; returns (checkpoint, env, val images).
    nbs=8 makes every batch an optimizer step: at the default nbs the 16 batches make a handful of steps,
    which leave every score near its initial value and nothing above the comparisons' thresholds."""
    env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
    name = Path(model).stem
    r = subprocess.run([LUCID, "train", f"model={model}", "epochs=2", "batch=8", "nbs=8", f"imgsz={TRAIN_IMGSZ}", "workers=2",
                        "device=cpu", "plots=False", f"project={tmp / 'runs'}", f"name={name}"],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"lucid train failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return tmp / "runs" / name / "weights" / "best.safetensors", env, tmp / "cache" / "synth-v1" / "images" / "val"


def export_test(body, optional=()):
    """The frame of an export test: skipped without its optional packages; body(tmp, ckpt, env, val,
    failures) runs with the small trained model in a temporary folder and appends what failed; the
    test exits with the failures."""
    if optional:
        require_optional(*optional)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        body(tmp, ckpt, env, val, failures)
    if failures:
        sys.exit("\n".join(failures[:30]))


def export(ckpt, fmt, out, *args):
    """`lucid export` of ckpt to out in fmt; prints its last line."""
    print(run([LUCID, "export", f"model={ckpt}", f"format={fmt}", *args, f"out={out}"]).strip().splitlines()[-1])


def square_and_conf(ckpt, val, tmp, conf):
    """Square copies of the validation images (tmp/square) and the lowest score compared: conf, raised
    above the one-to-one top-k boundary, whose tied scores make either side's choice arbitrary."""
    images = square_images(val, tmp / "square", TRAIN_IMGSZ)
    outputs = lucid_outputs(ckpt, [torch.stack(letterbox(images, TRAIN_IMGSZ, False))], tmp)
    return tmp / "square", images, boundary_conf([y[0] for y in outputs], conf)


def letterbox(paths, imgsz, auto):
    """The reference predictor's letterbox of each image (BGR file -> RGB (3, H, W) FP32 in [0, 1])."""
    import cv2
    from ultralytics.data.augment import LetterBox

    lb = LetterBox(imgsz, auto=auto, stride=32)
    out = []
    for p in paths:
        im = lb(image=cv2.imread(str(p)))
        out.append(torch.from_numpy(np.ascontiguousarray(im[..., ::-1].transpose(2, 0, 1))).float() / 255)
    return out


def lucid_outputs(model, inputs, tmp, nms="False"):
    """lucid's network (deploy_oracle_tool, as `lucid predict nms=...` loads model; False: an end-to-end
    model through its one-to-one head; None: every model's one-to-many head) on each input: [(pred, proto)]."""
    save_file({f"x{k}": x.contiguous() for k, x in enumerate(inputs)}, tmp / "inputs.safetensors")
    run([TOOL, model, tmp / "inputs.safetensors", tmp / "lucid_out.safetensors", nms])
    out = load_file(tmp / "lucid_out.safetensors")
    return [(out[f"{k}.pred"], out[f"{k}.proto"]) for k in range(len(inputs))]


def compare_layout(cmp, name, ours, ref, end2end, nc, tie=1e-4):
    """Export-layout outputs (pred, proto) against reference ones, part by part (boxes, scores, classes,
    coefficients, prototypes), each within the comparison's relative tolerance. End-to-end rows whose
    scores tie within `tie` may come in either order: each of ours is paired with the reference row of
    its class whose values are closest among those tied with it. Rows tied with the lowest score kept
    may have their counterparts just outside the top k and are left out (at least a tenth must remain)."""
    (p0, q0), (p1, q1) = ours, ref
    p0, p1 = p0.double(), p1.double()
    if p0.shape != p1.shape:
        cmp.failures.append(f"{name}: output0 shape {tuple(p0.shape)} vs {tuple(p1.shape)}")
        return
    if end2end:
        skipped = 0
        for b in range(p0.shape[0]):
            a, r = p0[b], p1[b].clone()
            paired = torch.empty_like(a)
            used = torch.zeros(len(r), dtype=torch.bool)
            floor = min(a[:, 4].min(), r[:, 4].min()) + tie
            for i in range(len(a)):
                if a[i, 4] <= floor:  # tied with the top-k boundary: its counterpart may rank just below k
                    paired[i] = a[i]
                    skipped += 1
                    continue
                cand = ((r[:, 4] - a[i, 4]).abs() <= tie) & (r[:, 5] == a[i, 5]) & ~used
                if not cand.any():
                    cand = ~used
                j = torch.nonzero(cand).flatten()
                j = j[(r[j] - a[i]).abs().max(1).values.argmin()]
                used[j] = True
                paired[i] = r[j]
            p1[b] = paired
        if skipped > p0.shape[0] * p0.shape[1] * 9 // 10:
            cmp.failures.append(f"{name}: {skipped} rows tied with the top-k boundary, fewer than a tenth left to compare")
        print(f"{name}: {skipped} of {p0.shape[0] * p0.shape[1]} rows tied with the top-k boundary left out")
        parts = {"boxes": (0, 4), "scores": (4, 5), "classes": (5, 6), "coefficients": (6, p0.shape[2])}
        for part, (s, e) in parts.items():
            cmp.check(f"{name} output0 {part}", p0[..., s:e], p1[..., s:e])
    else:
        parts = {"boxes": (0, 4), "scores": (4, 4 + nc), "coefficients": (4 + nc, p0.shape[1])}
        for part, (s, e) in parts.items():
            cmp.check(f"{name} output0 {part}", p0[:, s:e], p1[:, s:e])
    cmp.check(f"{name} output1 prototypes", q0, q1)


def boundary_conf(preds, conf, margin=2e-4):
    """A confidence threshold above every image's top-k boundary (the lowest score of its end-to-end
    rows) by margin, and at least conf: which of the anchors tied at the boundary make the top k
    depends on rounding, so detections at those scores are not comparable."""
    return max([conf] + [float(p[..., 4].min()) + margin for p in preds])


def lucid_predictions(model, source, imgsz, tmp, name, env, conf, extra=(), nms="False"):
    """`lucid predict nms=False` (the one-to-one head of an end-to-end model, as lucid's export carries
    it; nms="" for the one-to-many head and NMS; retina masks, predictions.json) -> {file name: [(score,
    class, xyxy, mask)]}."""
    run([LUCID, "predict", f"model={model}", f"source={source}", f"imgsz={imgsz}", f"conf={conf}", "device=cpu",
         "retina_masks=True", "save=False", "save_json=True", *([f"nms={nms}"] if nms else []),
         f"project={tmp / 'runs'}", f"name={name}", *extra])
    out = {}
    for p in json.loads((tmp / "runs" / name / "predictions.json").read_text()):
        b = p["bbox"]
        out.setdefault(p["file_name"], []).append(
            (p["score"], p["category_id"] - 1, np.array([b[0], b[1], b[0] + b[2], b[1] + b[3]]),
             mask_utils.decode(p["segmentation"]).astype(bool)))
    return out


def reference_predictions(results):
    """Ultralytics Results (retina masks) -> [(score, class, xyxy, mask)]."""
    out = []
    if results.boxes is not None:
        for k in range(len(results.boxes)):
            out.append((float(results.boxes.conf[k]), int(results.boxes.cls[k]), results.boxes.xyxy[k].numpy(),
                        results.masks.data[k].numpy() > 0.5))
    return out


class DetectionMatch:
    """Pairs detections image by image: the same count above conf (ignoring scores within `score_tol`
    of it), and each of ours with a detection of the other side of the same class and score (within
    score_tol) whose box is within box_tol px and whose mask IoU is at least iou_min."""

    def __init__(self, conf, score_tol, box_tol, iou_min):
        self.conf, self.score_tol, self.box_tol, self.iou_min = conf, score_tol, box_tol, iou_min
        self.failures, self.compared = [], 0
        self.worst = {"score": 0.0, "box": 0.0, "iou": 1.0}

    def image(self, name, mine, ref):
        keep = lambda ds: sorted([d for d in ds if d[0] > self.conf + self.score_tol], key=lambda d: -d[0])
        mine, ref = keep(mine), keep(ref)
        if len(mine) != len(ref):
            self.failures.append(f"{name}: {len(mine)} detections vs {len(ref)}")
            return
        left = list(ref)
        for s0, c0, b0, m0 in mine:
            cands = [d for d in left if d[1] == c0 and abs(d[0] - s0) <= self.score_tol]
            if not cands:
                self.failures.append(f"{name}: class {c0} score {s0:.5f} box {b0.round(2)} has no match")
                continue
            best = min(cands, key=lambda d: float(np.abs(d[2] - b0).max()))
            left = [d for d in left if d is not best]
            s1, _, b1, m1 = best
            self.compared += 1
            union = np.logical_or(m0, m1).sum()
            iou = np.logical_and(m0, m1).sum() / union if union else 1.0
            box = float(np.abs(b0 - b1).max())
            self.worst["score"] = max(self.worst["score"], abs(s0 - s1))
            self.worst["box"] = max(self.worst["box"], box)
            self.worst["iou"] = min(self.worst["iou"], iou)
            if box > self.box_tol or iou < self.iou_min:
                self.failures.append(f"{name}: class {c0} score {s0:.5f} box {b0.round(2)} vs {b1.round(2)}, "
                                     f"mask IoU {iou:.4f}")

    def finish(self, what):
        print(f"{what}: {self.compared} detections paired; worst score difference {self.worst['score']:.2g}, "
              f"box {self.worst['box']:.3g} px, lowest mask IoU {self.worst['iou']:.4f}")
        if self.compared == 0:
            self.failures.append(f"{what}: no detections above conf to compare")
        return [f"{what}: {f}" for f in self.failures]


SKIP = 77  # the exit status CTest reads as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt)


def require_optional(*modules):
    """Exits as skipped when an optional export package (requirements-export.txt) is absent."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        print(f"skipped: the optional package(s) {', '.join(missing)} are absent (pip install -r requirements-export.txt -c requirements.txt)")
        sys.exit(SKIP)


def square_images(val, folder, size):
    """The validation images cropped square and resized to size x size (PNG): every letterbox of them at
    imgsz=size, minimal or to the full square, is the image itself, so a fixed-shape file and lucid's
    eager model see the same input."""
    import cv2

    folder.mkdir(exist_ok=True)
    for p in sorted(val.glob("*.jpg")):
        im = cv2.imread(str(p))
        s = min(im.shape[:2])
        cv2.imwrite(str(folder / (p.stem + ".png")), cv2.resize(im[:s, :s], (size, size), interpolation=cv2.INTER_AREA))
    return sorted(folder.glob("*.png"))


def runtime_against_lucid(exported, ckpt, folder, imgsz, tmp, env, conf, what, nms="False", score_tol=1e-3):
    """The reference predictor running an exported file in its format's own runtime (its AutoBackend:
    onnxruntime, torch.jit, OpenVINO, the LiteRT interpreter, the ExecuTorch runtime) against `lucid
    predict` of the weights on the same images (retina masks): same classes, scores within score_tol,
    boxes within 1 px, mask IoU >= 0.99. Returns the failures."""
    from ultralytics import YOLO

    ours = lucid_predictions(ckpt, folder, imgsz, tmp, run_name("lucid", what), env, conf, nms=nms)
    model = YOLO(str(exported), task="segment")
    match = DetectionMatch(conf, score_tol=score_tol, box_tol=1.0, iou_min=0.99)
    for p in sorted(folder.glob("*.png")):
        res = model.predict(str(p), imgsz=imgsz, conf=conf, retina_masks=True, device="cpu", verbose=False)[0]
        match.image(p.name, ours.get(p.name, []), reference_predictions(res))
    return match.finish(what)


def run_name(prefix, what):
    """A run folder name of its own for each comparison (lucid predict numbers a taken name)."""
    return prefix + "-" + re.sub(r"[^A-Za-z0-9]+", "-", what).strip("-")


def expect_error(args, want, env, failures):
    """`lucid export ARGS` must fail with a message containing want (no signal, no library trace)."""
    r = subprocess.run([str(LUCID), "export", *map(str, args)], capture_output=True, text=True, env=env)
    msg = (r.stdout + r.stderr).strip()
    if r.returncode == 0 or want not in msg or "terminate" in msg or "Traceback" in msg:
        failures.append(f"export {' '.join(map(str, args))}: exit {r.returncode}, expected an error with '{want}': {msg[-400:]}")
    else:
        print(f"error as expected: {msg.splitlines()[-1]}")
