"""`lucid export format=torchscript` (the reference's TorchScript export) run in its two runtimes.
A 2-epoch yolo26n-seg run on the synthetic set (imgsz 128) is exported at 128 x 128, batch 2. In
Python, torch.jit.load's outputs on letterboxed inputs must equal lucid's network within 1e-4, and
the reference predictor running the file (torch.jit) must give the detections of `lucid predict` on
square images (same classes, scores within 1e-3, boxes within 1 px, mask IoU >= 0.99). In C++,
`lucid predict model=x.torchscript` (LibTorch's torch::jit, a batch of three run as chunks of two)
must give the same detections as `lucid predict` of the weights; a dynamic=True export must too on
the images' own minimal letterbox (non-square). The file's fixed size is enforced by name."""
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (TRAIN_IMGSZ as IMGSZ, LUCID, DetectionMatch, boundary_conf, compare_layout, letterbox,  # noqa: E402
                           lucid_outputs, lucid_predictions, run_name, runtime_against_lucid, square_images, train_small)
from oracle_common import Comparison, run  # noqa: E402

CONF = 0.001


def libtorch_against_eager(ts, ckpt, folder, imgsz, tmp, env, conf, what, extra=()):
    eager = lucid_predictions(ckpt, folder, imgsz, tmp, run_name("eager", what), env, conf, extra)
    script = lucid_predictions(ts, folder, imgsz, tmp, run_name("script", what), env, conf, extra)
    match = DetectionMatch(conf, score_tol=1e-3, box_tol=1.0, iou_min=0.99)
    for name in sorted(set(eager) | set(script)):
        match.image(name, script.get(name, []), eager.get(name, []))
    return match.finish(what)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        ts = tmp / "model.torchscript"
        print(run([LUCID, "export", f"model={ckpt}", "format=torchscript", "batch=2", f"out={ts}"]).strip().splitlines()[-1])
        square = tmp / "square"
        images = square_images(val, square, IMGSZ)

        # torch.jit in Python: raw outputs against lucid's network on the same inputs.
        module = torch.jit.load(str(ts))
        inputs = [torch.stack(letterbox(images[:2], IMGSZ, auto=False))]
        with torch.no_grad():
            ref = tuple(module(inputs[0]))
        cmp = Comparison(1e-4)
        compare_layout(cmp, "batch of 2", lucid_outputs(ckpt, inputs, tmp)[0], ref, True, 3)
        try:
            cmp.finish("torch.jit vs lucid's network")
        except SystemExit as e:
            failures.append(str(e))

        conf = boundary_conf([y[0] for y in lucid_outputs(ckpt, [torch.stack(letterbox(images, IMGSZ, False))], tmp)], CONF)
        print(f"detections compared above conf {conf:.5f}")
        failures += runtime_against_lucid(ts, ckpt, square, IMGSZ, tmp, env, conf, "torch.jit (reference predictor) vs lucid predict")

        # LibTorch in C++: lucid predict on the file, three images a batch (chunks of the file's two).
        failures += libtorch_against_eager(ts, ckpt, square, IMGSZ, tmp, env, conf, "LibTorch (lucid predict) vs eager",
                                           ["batch=3"])

        # dynamic=True: any multiple of 32, here each image's minimal letterbox.
        dyn = tmp / "dynamic.torchscript"
        run([LUCID, "export", f"model={ckpt}", "format=torchscript", "dynamic=True", "imgsz=160", f"out={dyn}"])
        conf = boundary_conf([y[0] for y in lucid_outputs(ckpt, [x[None] for x in letterbox(sorted(val.glob('*.jpg')), 160, True)], tmp)], CONF)
        failures += libtorch_against_eager(dyn, ckpt, val, 160, tmp, env, conf, "LibTorch dynamic (lucid predict) vs eager")

        r = subprocess.run([str(LUCID), "predict", f"model={ts}", f"source={images[0]}", "imgsz=160",
                            f"project={tmp / 'runs'}"], capture_output=True, text=True, env=env)
        msg = (r.stdout + r.stderr).strip()
        if r.returncode == 0 or "imgsz=128" not in msg:
            failures.append(f"predict a fixed 128 file at imgsz=160: exit {r.returncode}: {msg[-300:]}")
        else:
            print(f"error as expected: {msg.splitlines()[-1]}")
        r = subprocess.run([str(LUCID), "export", f"model={ckpt}", "format=torchscript", "half=True", f"out={tmp / 'h.torchscript'}"],
                           capture_output=True, text=True, env=env)
        if r.returncode == 0 or "CUDA device" not in r.stderr + r.stdout:
            failures.append(f"format=torchscript half=True on the CPU: exit {r.returncode}: {(r.stdout + r.stderr)[-300:]}")
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
