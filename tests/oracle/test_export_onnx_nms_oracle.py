"""`lucid export format=onnx` with the reference's simplify and nms options, written by lucid itself and
run by onnxruntime. A 2-epoch yolo26n-seg run on the synthetic set (imgsz 128): lucid writes the folded
graph whether simplify is True or False (no BatchNormalization node, a fixed-shape file's anchors as
constants: no Range node), so both give the same graph and outputs; nms=True embeds class-aware NMS
over the one-to-many head (outputs (1, 300, 6 + nm) rows after NMS at the given conf and iou), written
with no Python at all, and the reference predictor running that file in onnxruntime must give the
detections of `lucid predict` with its default head and NMS (same classes, scores within 1e-3, boxes
within 1 px, mask IoU >= 0.99); a dynamic nms=True file run on a batch of two gives each image the rows
it gets alone; a yolo11n-seg (no end-to-end head) exports the same layout. Options that do not fit
are refused by name."""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (TRAIN_IMGSZ as IMGSZ, LUCID, expect_error, letterbox, runtime_against_lucid,  # noqa: E402
                           square_images, train_small)
from oracle_common import run  # noqa: E402

CONF = 0.001  # a 2-epoch model scores low on its one-to-many head


def ort_run(path, x):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {"images": x.numpy()})


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        images = square_images(val, tmp / "square", IMGSZ)
        x = torch.stack(letterbox(images[:1], IMGSZ, auto=False))

        # simplify (the default) against simplify=False: the same folded graph.
        slim, plain = tmp / "slim.onnx", tmp / "plain.onnx"
        run([LUCID, "export", f"model={ckpt}", "format=onnx", f"out={slim}"])
        run([LUCID, "export", f"model={ckpt}", "format=onnx", "simplify=False", f"out={plain}"])
        ops = [[n.op_type for n in onnx.load(str(f)).graph.node] for f in (slim, plain)]
        print(f"nodes: {len(ops[0])} with simplify=True, {len(ops[1])} with simplify=False")
        if ops[0] != ops[1] or "BatchNormalization" in ops[0] or "Range" in ops[0]:
            failures.append(f"simplify: node kinds differ or are not folded: {sorted(set(ops[0]))}")
        a, b = ort_run(slim, x), ort_run(plain, x)
        if not all(np.array_equal(p, q) for p, q in zip(a, b)):
            failures.append("simplify=True and simplify=False give different outputs")

        # nms=True: rows after NMS inside the graph, against lucid predict's own NMS.
        for name, weights in [("yolo26", ckpt), ("yolo11", None)]:
            if weights is None:
                weights = tmp / "yolo11.safetensors"
                run([LUCID, "model", "save", "model=yolo11n-seg.yaml", "nc=3", f"out={weights}"])
            nms = tmp / f"{name}-nms.onnx"
            r = subprocess.run([str(LUCID), "export", f"model={weights}", "format=onnx", "nms=True", f"conf={CONF}",
                                "iou=0.7", f"imgsz={IMGSZ}", f"out={nms}"], capture_output=True, text=True,
                               env=dict(env, LUCID_PYTHON=str(tmp / "no-python")))
            if r.returncode != 0:
                sys.exit(f"{name} nms=True: export failed without Python:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            print(r.stdout.strip().splitlines()[-1])
            out = ort_run(nms, x)
            if out[0].shape != (1, 300, 6 + 32) or out[1].shape != (1, 32, IMGSZ // 4, IMGSZ // 4):
                failures.append(f"{name} nms=True: output shapes {[o.shape for o in out]}")
            if name == "yolo26":  # seeded yolo11 weights score below any useful conf: its layout only
                failures += runtime_against_lucid(nms, weights, tmp / "square", IMGSZ, tmp, env, CONF,
                                                  f"{name} nms=True (onnxruntime) vs lucid predict", nms="")

        # A batch of two through a dynamic file: each image's rows as it gets them alone.
        dyn = tmp / "nms-dynamic.onnx"
        run([LUCID, "export", f"model={ckpt}", "format=onnx", "nms=True", f"conf={CONF}", "dynamic=True",
             f"imgsz={IMGSZ}", f"out={dyn}"])
        pair = torch.stack(letterbox(images[:2], IMGSZ, auto=False))
        both = ort_run(dyn, pair)[0]
        alone = [ort_run(dyn, pair[k:k + 1])[0][0] for k in range(2)]
        kept = [int((a[:, 4] > 0).sum()) for a in alone]
        print(f"dynamic nms=True: {kept} rows kept for the two images alone")
        if both.shape != (2, 300, 38) or not all(np.allclose(both[k], alone[k], rtol=1e-5, atol=1e-4) for k in range(2)) \
                or min(kept) == 0:
            failures.append(f"dynamic nms=True on a batch of two: shape {both.shape}, rows kept {kept}, "
                            f"equal to alone: {[bool(np.allclose(both[k], alone[k], rtol=1e-5, atol=1e-4)) for k in range(2)]}")

        expect_error([f"model={ckpt}", "format=onnx", "conf=0.3"], "give nms=True", env, failures)
        expect_error([f"model={ckpt}", "format=aoti", "nms=True"], "option nms=", env, failures)
        expect_error([f"model={ckpt}", "format=onnx", "simplify=True", "nms=True", "iou=2"], "option iou=2", env, failures)
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
