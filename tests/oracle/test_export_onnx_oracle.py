"""`lucid export format=onnx` against lucid itself. A 2-epoch yolo26n-seg run on the synthetic set
(imgsz 128) is exported at imgsz 160 with dynamic=True (an end-to-end graph's top-300 needs 300
anchors: 128 x 160 has 420); onnxruntime on letterboxed inputs (one image at its minimal
letterbox, not square, and a batch of two at 160 x 160) must equal lucid's network (deploy_oracle_tool) in
the documented layout within 1e-4, and the reference predictor running the ONNX file must give the
detections of `lucid predict` (conf 0.001, or just above the top-k boundary's tied scores; retina masks: same classes, scores within 1e-4, boxes
within 1 px, mask IoU >= 0.99). A fixed-shape export (opset 17) has the documented shapes and
outputs; an FP16 export (the CPU conversion) keeps FP32 inputs and outputs with FP16 weights and
stays within 1e-2 of FP32; a yolo11n-seg (NMS head: the dense layout) equals lucid within 1e-4; and the errors
a user can cause name the option or file."""
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

        # Dynamic FP32 export, next to the weights by default.
        out = run([LUCID, "export", f"model={ckpt}", "format=onnx", "dynamic=True", f"imgsz={IMGSZ}"])
        onnx_path = ckpt.with_suffix(".onnx")
        print(out.strip().splitlines()[-1])
        if not onnx_path.is_file():
            sys.exit(f"no {onnx_path} after export")
        graph = onnx.load(str(onnx_path))
        meta = {p.key: p.value for p in graph.metadata_props}
        if meta.get("end2end") != "True" or meta.get("imgsz") != f"[{IMGSZ}, {IMGSZ}]" or meta.get("stride") != "32":
            failures.append(f"ONNX metadata end2end/imgsz/stride: {meta.get('end2end')} {meta.get('imgsz')} {meta.get('stride')}")

        # Raw outputs on the same letterboxed inputs: one image (its minimal letterbox) and a batch of two.
        minimal = [x for x in letterbox(images, IMGSZ, auto=True) if x.shape[1] != x.shape[2]]
        if not minimal:
            sys.exit("no validation image with a non-square letterbox")
        inputs = [minimal[0].unsqueeze(0), torch.stack(letterbox(images[1:3], IMGSZ, auto=False))]
        cmp = Comparison(1e-4)
        for k, (ours, ref) in enumerate(zip(lucid_outputs(ckpt, inputs, tmp), ort_outputs(onnx_path, inputs))):
            compare_layout(cmp, f"yolo26 input {k} {tuple(inputs[k].shape)}", ours, ref, end2end=True, nc=3)
            if ref[0].shape[1:] != (300, 6 + 32) or ref[1].shape[1:] != (32, inputs[k].shape[2] // 4, inputs[k].shape[3] // 4):
                failures.append(f"input {k}: output shapes {tuple(ref[0].shape)} {tuple(ref[1].shape)}")
        try:
            cmp.finish("onnxruntime vs lucid, yolo26 dynamic FP32")
        except SystemExit as e:
            failures.append(str(e))

        # Decoded detections: the reference predictor on the ONNX file vs `lucid predict`.
        conf = boundary_conf([y[0] for y in ort_outputs(onnx_path, [x[None] for x in letterbox(images, IMGSZ, True)])], CONF)
        print(f"detections compared above conf {conf:.5f}")
        ours = lucid_predictions(ckpt, val, IMGSZ, tmp, "p", env, conf)
        model = YOLO(str(onnx_path), task="segment")
        match = DetectionMatch(conf, score_tol=1e-4, box_tol=1.0, iou_min=0.99)
        for p in images:
            res = model.predict(str(p), imgsz=IMGSZ, conf=conf, retina_masks=True, device="cpu", verbose=False)[0]
            match.image(p.name, ours.get(p.name, []), reference_predictions(res))
        failures += match.finish("ONNX via the reference predictor vs lucid predict")

        # Fixed shape, opset 17.
        fixed = tmp / "fixed.onnx"
        run([LUCID, "export", f"model={ckpt}", "format=onnx", "opset=17", f"imgsz={IMGSZ}", f"out={fixed}"])
        g = onnx.load(str(fixed))
        opset = max(o.version for o in g.opset_import if o.domain in ("", "ai.onnx"))
        dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]
        shapes = [dims(g.graph.input[0])] + [dims(o) for o in g.graph.output]
        if opset != 17 or shapes != [[1, 3, IMGSZ, IMGSZ], [1, 300, 38], [1, 32, IMGSZ // 4, IMGSZ // 4]]:
            failures.append(f"fixed export: opset {opset}, shapes {shapes}")
        square = [inputs[1][:1]]
        cmp = Comparison(1e-4)
        compare_layout(cmp, "yolo26 fixed", lucid_outputs(ckpt, square, tmp)[0], ort_outputs(fixed, square)[0], True, 3)
        try:
            cmp.finish("onnxruntime vs lucid, yolo26 fixed opset 17")
        except SystemExit as e:
            failures.append(str(e))

        # FP16 (converted after tracing on the CPU): FP32 inputs and outputs, FP16 weights, near FP32.
        half = tmp / "half.onnx"
        run([LUCID, "export", f"model={ckpt}", "format=onnx", "half=True", f"imgsz={IMGSZ}", f"out={half}"])
        g = onnx.load(str(half))
        kinds = {t.data_type for t in g.graph.initializer}
        io = [v.type.tensor_type.elem_type for v in [*g.graph.input, *g.graph.output]]
        if onnx.TensorProto.FLOAT16 not in kinds or set(io) != {onnx.TensorProto.FLOAT}:
            failures.append(f"half export: initializer types {kinds}, input/output types {io}")
        h32, h16 = ort_outputs(fixed, square)[0], ort_outputs(half, square)[0]
        cmp = Comparison(1e-2)
        compare_layout(cmp, "FP16 vs FP32", h16, h32, True, 3, tie=1e-3)
        try:
            cmp.finish("onnxruntime FP16 vs FP32 export")
        except SystemExit as e:
            failures.append(str(e))

        # An NMS head (yolo11n-seg, seeded weights): the dense layout (B, 4 + nc + nm, A).
        w11 = tmp / "yolo11.safetensors"
        run([LUCID, "model", "save", "model=yolo11n-seg.yaml", "nc=3", f"out={w11}"])
        o11 = tmp / "yolo11.onnx"
        run([LUCID, "export", f"model={w11}", "format=onnx", f"imgsz={IMGSZ}", f"out={o11}", "dynamic=True"])
        cmp = Comparison(1e-4)
        for k, (ours, ref) in enumerate(zip(lucid_outputs(w11, inputs, tmp), ort_outputs(o11, inputs))):
            anchors = sum((inputs[k].shape[2] // s) * (inputs[k].shape[3] // s) for s in (8, 16, 32))
            if ref[0].shape[1:] != (4 + 3 + 32, anchors):
                failures.append(f"yolo11 input {k}: output0 shape {tuple(ref[0].shape)}")
            compare_layout(cmp, f"yolo11 input {k}", ours, ref, end2end=False, nc=3)
        try:
            cmp.finish("onnxruntime vs lucid, yolo11 dynamic FP32")
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

        error([f"model={ckpt}", "format=onnx", f"out={tmp / 'x.onnx'}"], "LUCID_PYTHON",
              {"LUCID_PYTHON": str(tmp / "no-python")})
        bare = tmp / "python-without-site-packages"
        bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
        bare.chmod(0o755)
        error([f"model={ckpt}", "format=onnx", f"out={tmp / 'x.onnx'}"], "missing: torch", {"LUCID_PYTHON": str(bare)})
        error([f"model={ckpt}", "format=onnx", "opset=3"], "option opset=3")
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
