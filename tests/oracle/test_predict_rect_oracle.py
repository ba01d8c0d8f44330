"""`lucid predict imgsz=[h, w]` against the Ultralytics predictor with the same weights, as
test_predict_oracle.py does for a square imgsz: a tiny `lucid train` run on the synthetic dataset,
its EMA weights converted to an Ultralytics checkpoint, then both predict the validation images at
rectangular input sizes given in the reference's spellings ("96,160", "[160, 96]", "(100, 150)",
the last rounded up to a multiple of 32 on both sides). Per image, the network input lucid reports
("image 1/N path: HxW") must be the reference's LetterBox(new_shape=(h, w), auto=True, stride=32)
shape, and the detections must agree as in test_predict_oracle.compare_results. The same at batch=3
over images of mixed sizes, which both letterbox to the full h x w. Val and train take one size:
imgsz=[h, w] there is the larger side with a warning, export refuses h != w."""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import test_predict_oracle as square
from oracle_common import BUILD_DIR, run

LUCID = BUILD_DIR / "lucid"
CONF = square.CONF
SIZES = (("96,160", (96, 160)), ("[160, 96]", (160, 96)), ("(100, 150)", (128, 160)))


def lucid_predict(tmp, ckpt, src, imgsz_text, name, batch=1):
    """lucid predict's predictions.json and each image's input shape (file name -> (h, w))."""
    out = run([LUCID, "predict", f"model={ckpt}", f"source={src}", f"imgsz={imgsz_text}", f"conf={CONF}",
               "device=cpu", "retina_masks=True", "save=False", "save_json=True", f"batch={batch}",
               f"project={tmp / 'runs'}", f"name={name}"])
    shapes = {Path(m[0]).name: (int(m[1]), int(m[2]))
              for m in re.findall(r"^image \d+/\d+ (\S+): (\d+)x(\d+) ", out, re.M)}
    return json.loads((tmp / "runs" / name / "predictions.json").read_text()), shapes


def check_shapes(paths, shapes, hw, auto, what):
    """Our input shapes against the reference's LetterBox on each image."""
    import cv2
    from ultralytics.data.augment import LetterBox

    letterbox = LetterBox(hw, auto=auto, stride=32)
    failures = []
    for p in paths:
        ref = letterbox(image=cv2.imread(str(p))).shape[:2]
        if shapes.get(p.name) != tuple(ref):
            failures.append(f"{what}: {p.name}: input {shapes.get(p.name)} vs reference LetterBox {tuple(ref)}")
    return failures


def mixed_folder(tmp, src):
    import cv2

    mixed = tmp / "mixed"
    mixed.mkdir()
    for k, p in enumerate(sorted(src.glob("*.jpg"))[:9]):
        im = cv2.imread(str(p))
        if k % 2:
            im = cv2.resize(im, (im.shape[1], im.shape[0] * 2 // 3), interpolation=cv2.INTER_AREA)
        cv2.imwrite(str(mixed / f"{k:02d}.jpg"), im, [cv2.IMWRITE_JPEG_QUALITY, 100])
    return mixed


def one_size_commands(tmp, ckpt):
    """val and train take the larger side of [h, w] with a warning; export refuses h != w."""
    failures = []
    r = subprocess.run([LUCID, "val", f"model={ckpt}", "imgsz=96,160", "device=cpu", "plots=False",
                        f"project={tmp / 'runs'}", "name=v"], capture_output=True, text=True)
    if r.returncode or "imgsz 160" not in r.stdout or "imgsz=[96, 160]" not in r.stderr:
        failures.append(f"val imgsz=96,160: expected a warning and imgsz 160:\n{r.stdout[-800:]}\n{r.stderr[-800:]}")
    r = subprocess.run([LUCID, "export", f"model={ckpt}", "format=onnx", "imgsz=[96,160]", f"out={tmp / 'x.onnx'}"],
                       capture_output=True, text=True)
    if r.returncode != 1 or "square" not in r.stderr:
        failures.append(f"export imgsz=[96,160]: expected a refusal naming square inputs:\n{r.stderr[-800:]}")
    r = subprocess.run([LUCID, "train", "imgsz=[64, 96]", "batch=0", "device=cpu"], capture_output=True, text=True)
    if "imgsz=[64, 96]" not in r.stderr or "imgsz=96" not in r.stderr:
        failures.append(f"train imgsz=[64, 96]: expected the larger-side warning:\n{r.stderr[-800:]}")
    return failures


def main():
    from ultralytics import YOLO

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        ckpt = square.trained_pair(tmp, env)
        src = tmp / "cache" / "synth-v1" / "images" / "val"
        paths = sorted(src.glob("*.jpg"))
        failures = []
        for k, (text, hw) in enumerate(SIZES):
            what = f"imgsz={text}"
            ours, shapes = lucid_predict(tmp, ckpt, src, text, f"r{k}")
            failures += check_shapes(paths, shapes, hw, True, what)
            model = YOLO(str(tmp / "ema.pt"), task="segment")
            results = {p: model.predict(str(p), imgsz=list(hw), conf=CONF, retina_masks=True, device="cpu",
                                        verbose=False)[0] for p in paths}
            failures += [f"{what}: {f}" for f in square.compare_results(results, ours, what)]
        mixed = mixed_folder(tmp, src)
        ours, shapes = lucid_predict(tmp, ckpt, mixed, "96,160", "mixed", batch=3)
        failures += check_shapes(sorted(mixed.glob("*.jpg")), shapes, (96, 160), False, "batch=3 mixed")
        model = YOLO(str(tmp / "ema.pt"), task="segment")
        results = model.predict(str(mixed), imgsz=[96, 160], conf=CONF, retina_masks=True, device="cpu",
                                verbose=False, batch=3)
        failures += [f"batch=3 mixed: {f}" for f in square.compare_results(
            {Path(r.path): r for r in results}, ours, "imgsz=96,160 batch=3 over images of mixed sizes")]
        failures += one_size_commands(tmp, ckpt)
        if failures:
            sys.exit("\n".join(failures[:20]))
        print("imgsz=[h, w]: input shapes and detections as the reference's")


if __name__ == "__main__":
    main()
