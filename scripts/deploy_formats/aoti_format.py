"""format=aoti: torch.export of lucid's network (lucid_yolo/nn, BatchNorms folded; an end-to-end
model's one-to-one top-k, every other model's dense output), compiled once with AOTInductor into a
package for input (B, 3, N, N) on one kind of device, which LibTorch's AOTIModelPackageLoader (and
`lucid predict`) runs with no Python."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import MAX_DET, check_device, deployed_network, example_input


def add_arguments(a):
    pass


def export(args):
    if args.quantize == 16 and not args.device.startswith("cuda"):
        sys.exit("format=aoti half=True needs a CUDA device (device=0): FP16 kernels are compiled for the GPU only")
    export_aoti(args.src, args.dst, args.imgsz, args.batch, args.quantize == 16, args.device)


def export_aoti(src, dst, imgsz, batch, half, device):
    import torch

    check_device(device, "aoti")
    model, names = deployed_network(src, nms=False, max_det=MAX_DET)
    dtype = torch.float16 if half else torch.float32
    model = model.to(device, dtype)
    head = model.network.head
    im = example_input(batch, imgsz, device, dtype)
    with torch.no_grad():
        y = model(im)
        program = torch.export.export(model, (im,))
    metadata = {
        "lucid.format": "1",
        "lucid.names": json.dumps(names),
        "lucid.nc": str(head.nc),
        "lucid.nm": str(head.nm),
        "lucid.imgsz": str(imgsz),
        "lucid.batch": str(batch),
        "lucid.stride": str(int(model.network.stride)),
        "lucid.end2end": "1" if model.layout == "one_to_one" else "0",
        "lucid.max_det": str(min(MAX_DET, sum((imgsz // int(s)) ** 2 for s in head.strides))),
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
