"""Run by test_exported_models.py with the installed lucid_yolo, in a folder holding weights.safetensors,
its exports (EXPORTS below: TorchScript, ONNX fixed, dynamic and with NMS inside) and square 64 x 64
PNG images: YOLO(file) must read the export's class names and size and predict what the weights
predict with the same head: same classes, scores within 1e-3, boxes within 1 px, mask IoU >= 0.99;
and its val() on the set of $LUCID_TEST_DATA must give the weights' metrics within 1e-3.
The ONNX files run in onnxruntime (lucid_yolo/runtimes.py)."""
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


# (file, the weights' head and NMS it carries, its predict and val options): TorchScript and ONNX with
# the one-to-one head at a fixed 64 x 64; ONNX with the one-to-many head at any size (NMS outside, here
# each image's own letterbox) and with NMS inside at a fixed size.
EXPORTS = [("model.torchscript", {"nms": False}, {}),
           ("model.onnx", {"nms": False}, {}),
           ("dynamic.onnx", {}, {"imgsz": 64}),
           ("dynamic_e2e.onnx", {"nms": False}, {"imgsz": 64}),
           ("nms.onnx", {}, {})]


def main():
    weights = YOLO("weights.safetensors")
    images = sorted(str(p) for p in Path(".").glob("*.png"))
    for name, head, options in EXPORTS:
        if not Path(name).exists():
            print(f"SKIP {name}: not exported here")
            continue
        exported = YOLO(name)
        check(exported.names == weights.names, f"YOLO('{name}').names are the weights' {exported.names}")
        ours = weights.predict(images, imgsz=64, **head)
        theirs = exported.predict(images, **options)
        check(sum(len(r) for r in ours) > 0, f"the weights predict {[len(r) for r in ours]} detections")
        for p, a, b in zip(images, ours, theirs):
            ok, what = matches(a, b)
            check(ok, f"{name} {p}: the exported file predicts the weights' detections ({what})")
        print(f"{name}: {sum(len(r) for r in theirs)} detections over {len(images)} images, as the weights'")
        # val on the set's validation split, rectangular batches as for the weights: the weights'
        # metrics with the same head. Files of a fixed size validate on square batches (the
        # reference's rect=False for them), whose loader is not held to the rectangular one here; and
        # validation's NMS is multi-label (a box per class above conf, as the reference's), which a
        # file with NMS inside (each anchor's best class) cannot match.
        if not name.startswith("dynamic"):
            continue
        data = os.environ["LUCID_TEST_DATA"]
        ref = weights.val(data=data, imgsz=64, batch=2, plots=False, **head).results_dict
        got = exported.val(data=data, batch=2, plots=False, **options).results_dict
        worst = max(abs(got[k] - ref[k]) for k in ref)
        check(got.keys() == ref.keys() and worst <= 1e-3, f"{name}.val() gives the weights' metrics: {got} vs {ref}")
        print(f"{name}.val(): {len(ref)} metrics within {worst:.2g} of the weights' (mask mAP50-95 {got['metrics/mAP50-95(M)']:.4f})")


if __name__ == "__main__":
    main()
    if failures:
        sys.exit(f"{len(failures)} check(s) failed:\n" + "\n".join(f[:300] for f in failures))
