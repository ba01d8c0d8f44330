#!/usr/bin/env python3
"""Deployable forms of lucid weights (`lucid export format=onnx|aoti`), made from the reference
implementation with lucid's weights (the state-dict names are identical; ultralytics_weights.py).

  onnx IN.safetensors OUT.onnx --imgsz N [--batch B] [--opset K] [--dynamic] [--half] [--device D]
      through the Ultralytics package's own ONNX exporter (its output names, layout and metadata);
      --half converts to FP16 with FP32 inputs and outputs (on CPU the exporter converts the graph
      after tracing, on CUDA it traces in FP16).
  aoti IN.safetensors OUT.pt2 --imgsz N [--batch B] [--half] [--device D]
      torch.export of the reference model in its export mode, compiled once with AOTInductor into a
      package for input (B, 3, N, N) on D, which LibTorch's AOTIModelPackageLoader runs with no Python.

Both give the head's export outputs (docs/deploy.md):
  output0  end-to-end heads (yolo26): (B, max_det, 6 + nm), rows x1 y1 x2 y2 score class coef..., the
           one-to-one top-k by score, in input pixels; NMS heads (yolov8, yolo11): (B, 4 + nc + nm, A),
           cx cy w h, class scores after the sigmoid, mask coefficients, A anchors
  output1  mask prototypes (B, nm, N/4, N/4)
Failures exit non-zero with a message naming the file or option.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import torch  # noqa: F401
    import ultralytics  # noqa: F401
    from ultralytics_weights import reference_model, write_pt
except ImportError as e:
    sys.exit(f"lucid export format=onnx|aoti needs torch, safetensors and ultralytics in {sys.executable} "
             f"(missing: {e.name or e}); set LUCID_PYTHON to the project's Python")

MAX_DET = 300  # rows of the end-to-end output, as the reference's export


def require(module, what):
    try:
        return __import__(module)
    except ImportError as e:
        sys.exit(f"{what} needs the Python package '{module}' in {sys.executable} ({e}); "
                 f"install the project's requirements (requirements.txt)")


def check_device(device, half, fmt):
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"format={fmt} device={device}: no usable CUDA device for this Python's torch")
    if fmt == "aoti" and half and not device.startswith("cuda"):
        sys.exit("format=aoti half=True needs a CUDA device (device=0): FP16 kernels are compiled for the GPU only")


def export_onnx(src, dst, imgsz, batch, opset, dynamic, half, device):
    import logging

    require("onnx", "format=onnx")
    if half and not device.startswith("cuda"):
        require("onnxruntime", "format=onnx half=True on the CPU (the FP16 conversion)")
    import onnx
    from onnx import TensorProto
    from ultralytics import YOLO
    from ultralytics.utils import LOGGER

    LOGGER.setLevel(logging.WARNING)  # the exporter's progress names its temporary files
    check_device(device, half, "onnx")
    model, cfg, _, _, data = reference_model(src)
    dst = Path(dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        pt = work / "model.pt"
        write_pt(model, cfg, imgsz, data, pt)
        args = dict(format="onnx", imgsz=imgsz, batch=batch, dynamic=dynamic, simplify=False, nms=False,
                    device="cpu" if device == "cpu" else device.removeprefix("cuda:"), verbose=False)
        if opset:
            args["opset"] = opset
        if half:
            args["quantize"] = 16
        out = Path(YOLO(str(pt), task="segment").export(**args))
        graph = onnx.load(str(out))
        names = [o.name for o in graph.graph.output]
        if names != ["output0", "output1"]:
            sys.exit(f"format=onnx: the exporter wrote outputs {names}, expected output0 and output1")
        if half:
            kinds = {t.data_type for t in graph.graph.initializer}
            if TensorProto.FLOAT16 not in kinds:
                sys.exit("format=onnx half=True: the exporter's FP16 conversion did not happen (see its warning above)")
        used = max((o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")), default=0)
        os.replace(out, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{dst}: ONNX opset {used}, {'FP16' if half else 'FP32'}, "
          f"{'dynamic batch, height and width' if dynamic else f'input ({batch}, 3, {imgsz}, {imgsz})'}")


def export_mode(model, imgsz):
    """The reference model as its exporter prepares it: fused, and the head in export mode (a plain
    (output0, output1) tuple; fixed input shape; max_det rows for end-to-end heads)."""
    from ultralytics.nn.modules import Detect

    if getattr(model.model[-1], "one2one_cv2", None) is not None:
        model.end2end = True  # yolo26's NMS-free one-to-one head, as the ONNX export's nms=False keeps it
    model = model.eval().float().fuse(verbose=False)
    anchors = sum((imgsz // int(s)) ** 2 for s in model.stride.tolist())
    for m in model.modules():
        if isinstance(m, Detect):
            m.dynamic = False
            m.export = True
            m.format = "aoti"
            m.max_det = min(MAX_DET, anchors)
            m.agnostic_nms = False
            m.xyxy = False
            m.shape = None
    return model


def export_aoti(src, dst, imgsz, batch, half, device):
    import torch

    check_device(device, half, "aoti")
    model, _, names, _, _ = reference_model(src)
    model = export_mode(model, imgsz).to(device)
    head = model.model[-1]
    dtype = torch.float16 if half else torch.float32
    model = model.to(dtype)
    im = torch.zeros(batch, 3, imgsz, imgsz, device=device, dtype=dtype)
    with torch.no_grad():
        y = model(im)
        program = torch.export.export(model, (im,))
    nc = int(model.yaml["nc"])
    names = names or [f"class{i}" for i in range(nc)]
    metadata = {
        "lucid.format": "1",
        "lucid.names": json.dumps(names),
        "lucid.nc": str(nc),
        "lucid.nm": str(int(head.nm)),
        "lucid.imgsz": str(imgsz),
        "lucid.batch": str(batch),
        "lucid.stride": str(int(max(model.stride))),
        "lucid.end2end": "1" if getattr(model, "end2end", False) else "0",
        "lucid.max_det": str(int(head.max_det)),
        "lucid.dtype": "float16" if half else "float32",
        "lucid.device": "cuda" if device.startswith("cuda") else "cpu",
        "lucid.output0": "x".join(str(d) for d in y[0].shape),
        "lucid.output1": "x".join(str(d) for d in y[1].shape),
    }
    dst = Path(dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:  # compiled under its own name (the archive's top folder), then moved into place
        tmp = work / dst.name
        torch._inductor.aoti_compile_and_package(program, package_path=str(tmp),
                                                 inductor_configs={"aot_inductor.metadata": metadata})
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{dst}: AOTInductor package, input ({batch}, 3, {imgsz}, {imgsz}) {metadata['lucid.dtype']} "
          f"on {metadata['lucid.device']}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("onnx", "aoti"):
        a = sub.add_parser(name)
        a.add_argument("src")
        a.add_argument("dst")
        a.add_argument("--imgsz", type=int, required=True)
        a.add_argument("--batch", type=int, default=1)
        a.add_argument("--half", action="store_true")
        a.add_argument("--device", default="cpu")
        if name == "onnx":
            a.add_argument("--opset", type=int, default=0)
            a.add_argument("--dynamic", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "onnx":
        export_onnx(args.src, args.dst, args.imgsz, args.batch, args.opset, args.dynamic, args.half, args.device)
    else:
        export_aoti(args.src, args.dst, args.imgsz, args.batch, args.half, args.device)


if __name__ == "__main__":
    main(sys.argv[1:])
