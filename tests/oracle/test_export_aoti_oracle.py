"""`lucid export format=aoti` against lucid itself. A 2-epoch yolo26n-seg run on the synthetic set
(imgsz 128) is compiled into a CPU package (.pt2, batch 2); the package's outputs, run by LibTorch's
AOTIModelPackageLoader as `lucid predict` loads it, must equal the eager network on the same
128 x 128 inputs within 1e-4 (three images: one full chunk of two and one padded), and `lucid predict
model=x.pt2` must give the detections of the eager `lucid predict` on square images (both see the
same unpadded input): same classes, scores within 1e-4, boxes within 1 px, mask IoU >= 0.99. The
package's fixed imgsz and device are enforced with errors naming them."""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (TRAIN_IMGSZ as IMGSZ, LUCID, DetectionMatch, boundary_conf, compare_layout, letterbox, lucid_outputs,  # noqa: E402
                           lucid_predictions, train_small)
from oracle_common import Comparison, run  # noqa: E402

CONF = 0.001


def main():
    import torch

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        pt2 = tmp / "model.pt2"
        t0 = time.monotonic()
        print(run([LUCID, "export", f"model={ckpt}", "format=aoti", "batch=2", f"out={pt2}"]).strip().splitlines()[-1])
        print(f"AOTInductor CPU compile: {time.monotonic() - t0:.0f} s")

        # Square images: the eager letterbox (minimal padding) and the package's (to imgsz) agree.
        square = tmp / "square"
        square.mkdir()
        for p in sorted(val.glob("*.jpg")):
            im = cv2.imread(str(p))
            s = min(im.shape[:2])
            cv2.imwrite(str(square / (p.stem + ".png")), cv2.resize(im[:s, :s], (IMGSZ, IMGSZ), interpolation=cv2.INTER_AREA))
        images = sorted(square.glob("*.png"))

        inputs = [torch.stack(letterbox(images[:3], IMGSZ, auto=False))]
        cmp = Comparison(1e-4)
        compare_layout(cmp, "3 images", lucid_outputs(pt2, inputs, tmp)[0], lucid_outputs(ckpt, inputs, tmp)[0], True, 3)
        try:
            cmp.finish("AOTInductor package vs eager network")
        except SystemExit as e:
            failures.append(str(e))

        conf = boundary_conf([y[0] for y in lucid_outputs(ckpt, [torch.stack(letterbox(images, IMGSZ, auto=False))], tmp)], CONF)
        print(f"detections compared above conf {conf:.5f}")
        eager = lucid_predictions(ckpt, square, IMGSZ, tmp, "eager", env, conf)
        compiled = lucid_predictions(pt2, square, IMGSZ, tmp, "compiled", env, conf)
        match = DetectionMatch(conf, score_tol=1e-4, box_tol=1.0, iou_min=0.99)
        for p in images:
            match.image(p.name, compiled.get(p.name, []), eager.get(p.name, []))
        failures += match.finish("lucid predict model=x.pt2 vs eager")

        for args, want in [(["imgsz=160"], "compiled for imgsz=128"), (["device=cuda"], "device")]:
            r = subprocess.run([str(LUCID), "predict", f"model={pt2}", f"source={images[0]}", *args,
                                f"project={tmp / 'runs'}"], capture_output=True, text=True, env=env)
            msg = (r.stdout + r.stderr).strip()
            if r.returncode == 0 or want not in msg or "terminate" in msg:
                failures.append(f"predict {' '.join(args)}: exit {r.returncode}, expected '{want}': {msg[-300:]}")
            else:
                print(f"error as expected: {msg.splitlines()[-1]}")
        bad = tmp / "bad.pt2"
        bad.write_bytes(b"PK\x03\x04 not a package")
        r = subprocess.run([str(LUCID), "predict", f"model={bad}", f"source={images[0]}", f"project={tmp / 'runs'}"],
                           capture_output=True, text=True, env=env)
        msg = (r.stdout + r.stderr).strip()
        if r.returncode == 0 or "not a compiled package" not in msg:
            failures.append(f"predict model=bad.pt2: exit {r.returncode}: {msg[-300:]}")
        else:
            print(f"error as expected: {msg.splitlines()[-1]}")
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
