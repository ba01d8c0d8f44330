"""`lucid export format=onnx`, written by lucid itself (no Python: LUCID_PYTHON points at nothing),
against lucid and against the reference's predictor. A 2-epoch yolo26n-seg run on the synthetic set
(imgsz 128) is exported at imgsz 160 with dynamic=True, by default (the reference's layout: the
one-to-many head's dense output for NMS outside, end2end False in the metadata) and with nms=False
(the one-to-one head's top-300; an end-to-end graph's top-300 needs 300 anchors: 128 x 160 has 420).
onnxruntime on letterboxed inputs (one image at its minimal letterbox, not square, and a batch of two
at 160 x 160) must equal lucid's network (deploy_oracle_tool, nms=None and nms=False) in the
documented layouts within 1e-4, and the reference predictor running each ONNX file must give the
detections of `lucid predict` with the same nms= (conf 0.001, or just above the top-k boundary's tied
scores; retina masks: same classes, scores within 1e-4, boxes within 1 px, mask IoU >= 0.99). Fixed-shape
exports (opset 17) have the documented shapes and outputs; an FP16 export keeps FP32 inputs and outputs
with FP16 weights and stays within 1e-2 of FP32; a yolo11n-seg and a yolov8n-seg (NMS heads: the dense
layout) equal lucid within 1e-4; and the errors a user can cause name the option or file."""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (LUCID, DetectionMatch, boundary_conf, compare_layout, letterbox, lucid_outputs,  # noqa: E402
                           lucid_predictions, reference_predictions, train_small)
from oracle_common import Comparison, run  # noqa: E402

CONF = 0.001
IMGSZ = 160


def ort_outputs(path, inputs):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [tuple(torch.from_numpy(y) for y in s.run(["output0", "output1"], {"images": x.numpy()})) for x in inputs]


def main():
    import subprocess
    from ultralytics import YOLO

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        images = sorted(val.glob("*.jpg"))

        no_python = dict(env, LUCID_PYTHON=str(tmp / "no-python"))
        minimal = [x for x in letterbox(images, IMGSZ, auto=True) if x.shape[1] != x.shape[2]]
        if not minimal:
            sys.exit("no validation image with a non-square letterbox")
        inputs = [minimal[0].unsqueeze(0), torch.stack(letterbox(images[1:3], IMGSZ, auto=False))]
        for nms, end2end in (("None", False), ("False", True)):
            what = f"yolo26 dynamic FP32, nms={nms}"
            # Next to the weights by default; no Python at all.
            r = subprocess.run([str(LUCID), "export", f"model={ckpt}", "format=onnx", "dynamic=True", f"imgsz={IMGSZ}",
                                *([] if nms == "None" else [f"nms={nms}"])], capture_output=True, text=True, env=no_python)
            onnx_path = ckpt.with_suffix(".onnx")
            if r.returncode != 0 or not onnx_path.is_file():
                sys.exit(f"{what}: export failed without Python ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            print(r.stdout.strip().splitlines()[-1])
            graph = onnx.load(str(onnx_path))
            onnx.checker.check_model(graph)
            meta = {p.key: p.value for p in graph.metadata_props}
            if meta.get("end2end") != str(end2end) or meta.get("imgsz") != f"[{IMGSZ}, {IMGSZ}]" or meta.get("stride") != "32":
                failures.append(f"{what}: metadata end2end/imgsz/stride: {meta.get('end2end')} {meta.get('imgsz')} {meta.get('stride')}")
            if eval(meta.get("names", "{}")) != {0: "ellipse", 1: "rectangle", 2: "star"}:  # the reference's reading
                failures.append(f"{what}: metadata names {meta.get('names')}")
            cmp = Comparison(1e-4)
            for k, (ours, ref) in enumerate(zip(lucid_outputs(ckpt, inputs, tmp, nms), ort_outputs(onnx_path, inputs))):
                compare_layout(cmp, f"{what} input {k} {tuple(inputs[k].shape)}", ours, ref, end2end=end2end, nc=3)
                anchors = sum((inputs[k].shape[2] // s) * (inputs[k].shape[3] // s) for s in (8, 16, 32))
                want = (300, 6 + 32) if end2end else (4 + 3 + 32, anchors)
                if ref[0].shape[1:] != want or ref[1].shape[1:] != (32, inputs[k].shape[2] // 4, inputs[k].shape[3] // 4):
                    failures.append(f"{what} input {k}: output shapes {tuple(ref[0].shape)} {tuple(ref[1].shape)}")
            try:
                cmp.finish(f"onnxruntime vs lucid, {what}")
            except SystemExit as e:
                failures.append(str(e))
            # Decoded detections: the reference predictor on the ONNX file vs `lucid predict` with the same nms=.
            conf = CONF
            if end2end:
                conf = boundary_conf([y[0] for y in ort_outputs(onnx_path, [x[None] for x in letterbox(images, IMGSZ, True)])], CONF)
            print(f"{what}: detections compared above conf {conf:.5f}")
            ours = lucid_predictions(ckpt, val, IMGSZ, tmp, f"p{nms}", env, conf, nms="" if nms == "None" else nms)
            model = YOLO(str(onnx_path), task="segment")
            match = DetectionMatch(conf, score_tol=1e-4, box_tol=1.0, iou_min=0.99)
            for p in images:
                res = model.predict(str(p), imgsz=IMGSZ, conf=conf, retina_masks=True, device="cpu", verbose=False)[0]
                match.image(p.name, ours.get(p.name, []), reference_predictions(res))
            failures += match.finish(f"{what}: the ONNX file via the reference predictor vs lucid predict")

        # Fixed shape, opset 17: the default layout and the one-to-one head's.
        square = [inputs[1][:1]]
        fixed = {}
        for nms, end2end in (("None", False), ("False", True)):
            fixed[nms] = tmp / f"fixed-{nms}.onnx"
            run([LUCID, "export", f"model={ckpt}", "format=onnx", "opset=17", f"imgsz={IMGSZ}", f"out={fixed[nms]}",
                 *([] if nms == "None" else [f"nms={nms}"])])
            g = onnx.load(str(fixed[nms]))
            opset = max(o.version for o in g.opset_import if o.domain in ("", "ai.onnx"))
            dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]
            shapes = [dims(g.graph.input[0])] + [dims(o) for o in g.graph.output]
            a = sum((IMGSZ // s) ** 2 for s in (8, 16, 32))
            want = [1, 300, 38] if end2end else [1, 4 + 3 + 32, a]
            if opset != 17 or shapes != [[1, 3, IMGSZ, IMGSZ], want, [1, 32, IMGSZ // 4, IMGSZ // 4]]:
                failures.append(f"fixed export nms={nms}: opset {opset}, shapes {shapes}")
            cmp = Comparison(1e-4)
            compare_layout(cmp, f"yolo26 fixed nms={nms}", lucid_outputs(ckpt, square, tmp, nms)[0],
                           ort_outputs(fixed[nms], square)[0], end2end, 3)
            try:
                cmp.finish(f"onnxruntime vs lucid, yolo26 fixed opset 17 nms={nms}")
            except SystemExit as e:
                failures.append(str(e))

        # FP16: FP32 inputs and outputs, FP16 weights, near FP32.
        half = tmp / "half.onnx"
        run([LUCID, "export", f"model={ckpt}", "format=onnx", "half=True", "nms=False", f"imgsz={IMGSZ}", f"out={half}"])
        g = onnx.load(str(half))
        kinds = {t.data_type for t in g.graph.initializer}
        io = [v.type.tensor_type.elem_type for v in [*g.graph.input, *g.graph.output]]
        if onnx.TensorProto.FLOAT16 not in kinds or set(io) != {onnx.TensorProto.FLOAT}:
            failures.append(f"half export: initializer types {kinds}, input/output types {io}")
        h32, h16 = ort_outputs(fixed["False"], square)[0], ort_outputs(half, square)[0]
        cmp = Comparison(1e-2)
        compare_layout(cmp, "FP16 vs FP32", h16, h32, True, 3, tie=1e-3)
        try:
            cmp.finish("onnxruntime FP16 vs FP32 export")
        except SystemExit as e:
            failures.append(str(e))

        # NMS heads (yolo11n-seg, yolov8n-seg, seeded weights): the dense layout (B, 4 + nc + nm, A).
        for family in ("yolo11", "yolov8"):
            w = tmp / f"{family}.safetensors"
            run([LUCID, "model", "save", f"model={family}n-seg.yaml", "nc=3", f"out={w}"])
            o = tmp / f"{family}.onnx"
            r = subprocess.run([str(LUCID), "export", f"model={w}", "format=onnx", f"imgsz={IMGSZ}", f"out={o}",
                                "dynamic=True"], capture_output=True, text=True, env=no_python)
            if r.returncode != 0:
                failures.append(f"{family}: export failed without Python: {r.stderr[-500:]}")
                continue
            cmp = Comparison(1e-4)
            for k, (ours, ref) in enumerate(zip(lucid_outputs(w, inputs, tmp, "None"), ort_outputs(o, inputs))):
                anchors = sum((inputs[k].shape[2] // s) * (inputs[k].shape[3] // s) for s in (8, 16, 32))
                if ref[0].shape[1:] != (4 + 3 + 32, anchors):
                    failures.append(f"{family} input {k}: output0 shape {tuple(ref[0].shape)}")
                compare_layout(cmp, f"{family} input {k}", ours, ref, end2end=False, nc=3)
            try:
                cmp.finish(f"onnxruntime vs lucid, {family} dynamic FP32")
            except SystemExit as e:
                failures.append(str(e))

        # Errors a user can cause.
        def error(args, want, extra_env=None):
            r = subprocess.run([str(LUCID), "export", *args], capture_output=True, text=True,
                               env=dict(env, **(extra_env or {})))
            msg = (r.stdout + r.stderr).strip()
            if r.returncode == 0 or want not in msg or "terminate" in msg:
                failures.append(f"export {' '.join(args)}: exit {r.returncode}, expected an error with '{want}': {msg[-300:]}")
            else:
                print(f"error as expected: {msg.splitlines()[-1]}")

        # The formats still made by the Python exporter name the Python when it cannot serve.
        error([f"model={ckpt}", "format=torchscript", f"out={tmp / 'x.torchscript'}"], "LUCID_PYTHON",
              {"LUCID_PYTHON": str(tmp / "no-python")})
        bare = tmp / "python-without-site-packages"
        bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
        bare.chmod(0o755)
        error([f"model={ckpt}", "format=torchscript", f"out={tmp / 'x.torchscript'}"], "packages torch, safetensors",
              {"LUCID_PYTHON": str(bare)})
        error([f"model={ckpt}", "format=onnx", "opset=3"], "option opset=3")
        error([f"model={ckpt}", "format=onnx", "opset=11"], "option opset=11")
        error([f"model={ckpt}", "format=safetensors", "opset=17"], "option opset=")
        error([f"model={ckpt}", "format=aoti", "dynamic=True"], "option dynamic=")
        error([f"model={ckpt}", "format=aoti", "half=True"], "option half=True")
        error([f"model={ckpt}", "format=aoti", f"out={tmp / 'x.so'}"], ".pt2")
        error([f"model={ckpt}", "format=onnx", "device=gpu"], "option device=gpu")
        error([f"model={ckpt}", "format=paddle"], "option format=paddle")
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
