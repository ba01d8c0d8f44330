"""The installed C++ library: `cmake --install` of the build into a temporary prefix, then
examples/predict_minimal configured and built against that prefix alone (find_package(lucid),
lucid::lucid), run on an image with the weights of a tiny training run on a small synthetic set.
Its detections equal `lucid predict`'s on the same image, with the default nms and with nms=False
(same count and order, classes, boxes
within 1 px, scores within 1e-4, mask areas equal) and its annotated image is written; a missing
weights file is one error line naming it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, check, failures, synth_data, train  # noqa: E402
from lucid_runs import lucid as run  # noqa: E402

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def step(args, what, cwd=None, env=None):
    """A build step; a failure stops the test with its output."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        data = synth_data(tmp / "synth", env, n_train=16, n_val=4, imgsz=160)
        train([f"data={data}", "epochs=1", "batch=8", "workers=2", "device=cpu", "plots=False"], env,
              tmp / "runs", "train")
        weights = tmp / "runs" / "train" / "weights" / "best.safetensors"
        image = sorted((tmp / "synth" / "images" / "val").iterdir())[0]

        prefix = tmp / "prefix"
        step(["cmake", "--install", BUILD_DIR, "--prefix", prefix], "cmake --install")
        check((prefix / "include" / "lucid" / "lucid.h").exists(), "installed include/lucid/lucid.h")
        configs = list(prefix.glob("lib*/cmake/lucid/lucidConfig.cmake"))
        check(len(configs) == 1, f"installed the package config {configs}")

        example = tmp / "example"
        configure = ["cmake", "-S", SOURCE_DIR / "examples" / "predict_minimal", "-B", example, "-G", "Ninja",
                     f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ccache"):
            configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        step(configure, "configuring examples/predict_minimal")
        step(["cmake", "--build", example, "-j2"], "building examples/predict_minimal")

        drawn = tmp / "drawn.jpg"
        # The default (the one-to-many head and NMS) and nms=False (yolo26's one-to-one head), each
        # against lucid predict with the same nms=.
        for nms in ([], ["nms=False"]):
            what = " ".join(nms) or "default nms"
            ex = step([example / "predict_minimal", weights, image, drawn, "conf=0.001", "device=cpu", *nms],
                      f"predict_minimal {what}")
            rows = [line.split() for line in ex.stdout.splitlines()]
            name = "predict" + "".join(n.split("=")[1] for n in nms)
            run(["predict", f"model={weights}", f"source={image}", "conf=0.001", "device=cpu", "save=False",
                 "save_json=True", f"project={tmp / 'runs'}", f"name={name}", *nms], env)
            ref = json.loads((tmp / "runs" / name / "predictions.json").read_text())

            check(len(ref) > 0 and len(rows) == len(ref), f"{what}: {len(rows)} detections, lucid predict {len(ref)}")
            ok_cls = ok_box = ok_score = ok_mask = True
            for r, p in zip(rows, ref):
                cls, cname, score = int(r[0]), r[1], float(r[2])
                x1, y1, x2, y2 = map(float, r[3:7])
                area = int(r[7])
                bx, by, bw, bh = p["bbox"]
                ok_cls &= cls == p["category_id"] - 1 and cname == p["category_name"]
                ok_box &= max(abs(x1 - bx), abs(y1 - by), abs(x2 - (bx + bw)), abs(y2 - (by + bh))) <= 1.0
                ok_score &= abs(score - p["score"]) <= 1e-4
                ok_mask &= area == int(mask_utils.area(p["segmentation"]))
            check(ok_cls, f"{what}: classes and class names equal lucid predict's")
            check(ok_box, f"{what}: boxes within 1 px of lucid predict's")
            check(ok_score, f"{what}: scores within 1e-4 of lucid predict's")
            check(ok_mask, f"{what}: mask areas equal lucid predict's")

        if "plots skipped" in ex.stderr or not drawn.exists():
            check(False, f"annotated image written: {ex.stderr.strip()}")
        else:
            with Image.open(drawn) as im:
                check(im.format == "JPEG" and im.size == Image.open(image).size, "annotated image: JPEG of the image size")
                differs = np.abs(np.asarray(im.convert("RGB"), dtype=int) -
                                 np.asarray(Image.open(image).convert("RGB"), dtype=int)).max() > 40
            check(differs, "annotated image differs from the source")

        e = subprocess.run([example / "predict_minimal", tmp / "nope.safetensors", image], capture_output=True, text=True)
        check(e.returncode == 1 and "nope.safetensors" in e.stderr and len(e.stderr.strip().splitlines()) == 1,
              f"missing weights: {e.stderr.strip()}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
