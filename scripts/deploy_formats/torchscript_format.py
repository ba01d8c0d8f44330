"""format=torchscript: torch.jit.trace of lucid's network (lucid_yolo/nn, BatchNorms folded) in the
layout of nms= (docs/deploy.md), the reference's metadata as JSON in the archive's extra file
config.txt, which torch.jit.load runs in Python and torch::jit::load in C++ (`lucid predict
model=best.torchscript`). FP16 only when traced on a CUDA device, as the reference. nms=True traces
torchvision's NMS into the file, which then needs torchvision's operators where it is loaded."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import check_device, deployed_network, example_input, metadata, precision_name


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def export(args):
    if args.quantize == 16 and not args.device.startswith("cuda"):
        sys.exit("format=torchscript half=True traces in FP16 on a CUDA device only (device=0), as the reference")
    nms = args.nms
    if nms and args.dynamic:
        sys.exit("format=torchscript nms=True dynamic=True: the NMS inside is traced for the export's batch; "
                 "give dynamic=False, or nms=False (NMS outside)")
    import torch

    check_device(args.device, "torchscript")
    deployed, names = deployed_network(args.src, nms, conf=args.conf, iou=args.iou)
    dtype = torch.float16 if args.quantize == 16 else torch.float32
    deployed = deployed.to(args.device, dtype)
    im = example_input(args.batch, args.imgsz, args.device, dtype)
    with torch.no_grad():
        traced = torch.jit.trace(deployed, im, strict=False, check_trace=False)
    meta = metadata(deployed, names, args.imgsz, args.batch,
                    {"batch": args.batch, "half": args.quantize == 16, "dynamic": args.dynamic, "nms": nms})
    dst = Path(args.dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        tmp = work / dst.name
        torch.jit.save(traced, str(tmp), _extra_files={"config.txt": json.dumps(meta)})
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{dst}: TorchScript, {precision_name(args.quantize)}, "
          f"{'any batch and size (multiples of 32)' if args.dynamic else f'input ({args.batch}, 3, {args.imgsz}, {args.imgsz})'}"
          f"{f', NMS inside (conf {args.conf}, iou {args.iou})' if nms else ''}")

