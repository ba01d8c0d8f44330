"""`lucid predict` against the Ultralytics predictor with the same weights: a tiny `lucid train` run
on the synthetic dataset, its EMA weights converted to an Ultralytics checkpoint
(scripts/ultralytics_weights.py), then both predict the validation images (imgsz 128, retina_masks,
conf 0.0005: the two-epoch run, still inside its warmup, scores around 0.001), on both sides'
default (nms=None: the one-to-many head and NMS) and through the one-to-one head (nms=False on both
sides). Per image the detections must agree: same count (ignoring scores within 1e-4 of conf), and
each of ours pairs with a reference detection of the same class and score (within 1e-4) whose box
is within 0.05 px and mask IoU >= 0.98. The same at batch=3 over a folder of images of mixed sizes,
which both letterbox to the full square."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from pycocotools import mask as mask_utils
from safetensors.torch import load_file, save_file

from oracle_common import BUILD_DIR, SOURCE_DIR, run

LUCID = BUILD_DIR / "lucid"
CONF = 0.0005


def trained_pair(tmp, env):
    """A yolo26n-seg lucid trains 2 epochs on the synthetic set at 128 px (its data under tmp/cache), and
    its EMA weights as the reference's FP32 .pt (tmp/ema.pt); returns lucid's checkpoint."""
    r = subprocess.run([LUCID, "train", "epochs=2", "batch=8", "imgsz=128", "workers=2", "device=cpu", "plots=False",
                        f"project={tmp / 'runs'}", "name=t"], env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"lucid train failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    ckpt = tmp / "runs" / "t" / "weights" / "best.safetensors"
    ema = {k[4:]: v for k, v in load_file(ckpt).items() if k.startswith("ema/")}
    save_file(ema, tmp / "ema.safetensors")
    run([sys.executable, SOURCE_DIR / "scripts" / "ultralytics_weights.py", "to-pt", "yolo26n-seg.yaml",
         tmp / "ema.safetensors", tmp / "ema.pt", "--nc", "3", "--fp32"])
    return ckpt


def main():
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        ckpt = trained_pair(tmp, env)
        src = tmp / "cache" / "synth-v1" / "images" / "val"
        failures = []
        for what, nms in (("default (NMS)", None), ("one-to-one (nms=False)", False)):
            model = YOLO(str(tmp / "ema.pt"), task="segment")  # a predictor sets its head up once
            name = "p" if nms is None else "p_o2o"
            run([LUCID, "predict", f"model={ckpt}", f"source={src}", "imgsz=128", f"conf={CONF}", "device=cpu",
                 "retina_masks=True", "save=False", "save_json=True", f"project={tmp / 'runs'}", f"name={name}",
                 *([] if nms is None else [f"nms={nms}"])])
            ours = json.loads((tmp / "runs" / name / "predictions.json").read_text())
            kwargs = {} if nms is None else {"nms": nms}
            failures += [f"{what}: {f}" for f in compare(model, src, ours, kwargs, what)]
        failures += mixed_batch(tmp, ckpt, src)
        if failures:
            sys.exit("\n".join(failures[:20]))


def mixed_batch(tmp, ckpt, src):
    """batch=3 over nine images, every second one of another size: the reference letterboxes a batch
    of mixed sizes to the full imgsz square; lucid must predict what the reference's predictor does
    with batch=3 on the same folder."""
    import cv2
    from ultralytics import YOLO

    mixed = tmp / "mixed"
    mixed.mkdir()
    for k, p in enumerate(sorted(src.glob("*.jpg"))[:9]):
        im = cv2.imread(str(p))
        if k % 2:
            im = cv2.resize(im, (im.shape[1], im.shape[0] * 2 // 3), interpolation=cv2.INTER_AREA)
        cv2.imwrite(str(mixed / f"{k:02d}.jpg"), im, [cv2.IMWRITE_JPEG_QUALITY, 100])
    run([LUCID, "predict", f"model={ckpt}", f"source={mixed}", "imgsz=128", f"conf={CONF}", "device=cpu", "batch=3",
         "retina_masks=True", "save=False", "save_json=True", f"project={tmp / 'runs'}", "name=mixed"])
    ours = json.loads((tmp / "runs" / "mixed" / "predictions.json").read_text())
    model = YOLO(str(tmp / "ema.pt"), task="segment")
    results = model.predict(str(mixed), imgsz=128, conf=CONF, retina_masks=True, device="cpu", verbose=False, batch=3)
    shapes = {tuple(r.orig_shape) for r in results}
    failures = [] if len(shapes) > 1 else [f"the mixed folder's images have one size {shapes}"]
    return failures + [f"batch=3, mixed sizes: {f}" for f in
                       compare_results({Path(r.path): r for r in results}, ours, "batch=3 over images of mixed sizes")]


def compare(model, src, ours, kwargs, what):
    """The reference's predictions of each image alone against ours."""
    results = {p: model.predict(str(p), imgsz=128, conf=CONF, retina_masks=True, device="cpu", verbose=False,
                                **kwargs)[0] for p in sorted(src.glob("*.jpg"))}
    return compare_results(results, ours, what)


def compare_results(results, ours, what):
    """The reference's Results by image path against ours (predictions.json records)."""
    worst = {"score": 0.0, "box": 0.0, "iou": 1.0}
    failures, compared = [], 0
    for path, res in results.items():
        ref = []
        if res.boxes is not None and len(res.boxes):
            for k in range(len(res.boxes)):
                ref.append((float(res.boxes.conf[k]), int(res.boxes.cls[k]), res.boxes.xyxy[k].numpy(),
                            res.masks.data[k].numpy() > 0.5))
        mine = [(p["score"], p["category_id"] - 1,
                 np.array([p["bbox"][0], p["bbox"][1], p["bbox"][0] + p["bbox"][2], p["bbox"][1] + p["bbox"][3]]),
                 mask_utils.decode(p["segmentation"]).astype(bool)) for p in ours if p["file_name"] == path.name]
        ref = sorted([d for d in ref if d[0] > CONF + 1e-4], key=lambda d: -d[0])
        mine = sorted([d for d in mine if d[0] > CONF + 1e-4], key=lambda d: -d[0])
        if len(ref) != len(mine):
            failures.append(f"{path.name}: {len(mine)} detections vs reference {len(ref)}")
            continue
        # Pair each of ours with the reference detection of the same class and score (ties in score
        # order are not meaningful) whose box is closest.
        left = list(ref)
        for s0, c0, b0, m0 in mine:
            cands = [d for d in left if d[1] == c0 and abs(d[0] - s0) <= 1e-4]
            if not cands:
                failures.append(f"{path.name}: ours class {c0} score {s0:.5f} box {b0.round(2)} has no reference match")
                continue
            best = min(cands, key=lambda d: float(np.abs(d[2] - b0).max()))
            left = [d for d in left if d is not best]  # by identity: the tuples hold arrays
            s1, c1, b1, m1 = best
            compared += 1
            inter, union = np.logical_and(m0, m1).sum(), np.logical_or(m0, m1).sum()
            iou = inter / union if union else 1.0
            worst["score"] = max(worst["score"], abs(s0 - s1))
            worst["box"] = max(worst["box"], float(np.abs(b0 - b1).max()))
            worst["iou"] = min(worst["iou"], iou)
            if np.abs(b0 - b1).max() > 0.05 or iou < 0.98:
                failures.append(f"{path.name}: ours class {c0} score {s0:.5f} box {b0.round(2)}, reference "
                                f"box {b1.round(2)}, mask IoU {iou:.4f}")
    print(f"{what}: {compared} detections compared; worst score difference {worst['score']:.2g}, "
          f"box {worst['box']:.3g} px, lowest mask IoU {worst['iou']:.4f}")
    if compared == 0:
        failures.append("no detections above conf to compare")
    return failures

if __name__ == "__main__":
    main()
