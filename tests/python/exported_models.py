"""Run by test_exported_models.py with the installed lucid_yolo, in a folder holding weights.safetensors,
its TorchScript export model.torchscript (fixed 64 x 64 input, the one-to-one head) and square 64 x 64
PNG images: YOLO("model.torchscript") must read the export's class names and size and predict what the
weights predict with the same head (nms=False): same classes, scores within 1e-3, boxes within 1 px,
mask IoU >= 0.99."""
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.environ["LUCID_TEST_COMMON"])
from lucid_runs import check, failures  # noqa: E402

from lucid_yolo import YOLO  # noqa: E402


def mask_iou(a, b):
    union = (a.bool() | b.bool()).sum().item()
    return (a.bool() & b.bool()).sum().item() / union if union else 1.0


def matches(a, b):
    """Detections of one image: each of a paired with the unused detection of b of its class, score
    within 1e-3, whose box is closest (scores tie among confident detections, so order alone does not
    pair them)."""
    if len(a) != len(b):
        return False, f"{len(a)} vs {len(b)} detections"
    used, worst_box, worst_iou = set(), 0.0, 1.0
    for i in range(len(a)):
        near = [j for j in range(len(b)) if j not in used and b.boxes.cls[j] == a.boxes.cls[i]
                and abs(float(b.boxes.conf[j] - a.boxes.conf[i])) <= 1e-3]
        if not near:
            return False, f"detection {i} has no counterpart of its class and score"
        j = min(near, key=lambda j: float((b.boxes.xyxy[j] - a.boxes.xyxy[i]).abs().max()))
        used.add(j)
        worst_box = max(worst_box, float((b.boxes.xyxy[j] - a.boxes.xyxy[i]).abs().max()))
        worst_iou = min(worst_iou, mask_iou(a.masks.data[i], b.masks.data[j]))
    return worst_box <= 1.0 and worst_iou >= 0.99, f"{len(a)} paired, box {worst_box:.2g} px, mask IoU {worst_iou:.4f}"


def main():
    weights, script = YOLO("weights.safetensors"), YOLO("model.torchscript")
    check(script.names == weights.names, f"YOLO('model.torchscript').names are the weights' {script.names}")
    images = sorted(str(p) for p in Path(".").glob("*.png"))
    ours = weights.predict(images, imgsz=64, nms=False)
    theirs = script.predict(images)
    check(sum(len(r) for r in ours) > 0, f"the weights predict {[len(r) for r in ours]} detections")
    for p, a, b in zip(images, ours, theirs):
        ok, what = matches(a, b)
        check(ok, f"{p}: the TorchScript file predicts the weights' detections ({what})")


if __name__ == "__main__":
    main()
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
