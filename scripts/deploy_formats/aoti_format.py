"""format=aoti: torch.export of the reference model in its export mode, compiled once with
AOTInductor into a package for input (B, 3, N, N) on one kind of device, which LibTorch's
AOTIModelPackageLoader (and `lucid predict`) runs with no Python."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import MAX_DET, check_device, require_reference


def add_arguments(a):
    pass


def export(args):
    require_reference()
    if args.quantize == 16 and not args.device.startswith("cuda"):
        sys.exit("format=aoti half=True needs a CUDA device (device=0): FP16 kernels are compiled for the GPU only")
    export_aoti(args.src, args.dst, args.imgsz, args.batch, args.quantize == 16, args.device)


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
    from ultralytics_weights import reference_model

    check_device(device, "aoti")
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
