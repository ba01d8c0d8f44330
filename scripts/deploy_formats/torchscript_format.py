"""format=torchscript: the reference's TorchScript export (torch.jit.trace of the model in export
mode, its metadata as JSON in the archive's extra file config.txt), which torch.jit.load runs in
Python and torch::jit::load in C++ (`lucid predict model=best.torchscript`). FP16 only when traced
on a CUDA device, as the reference."""
import sys

from .common import precision_name, reference_export


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def export(args):
    if args.quantize == 16 and not args.device.startswith("cuda"):
        sys.exit("format=torchscript half=True traces in FP16 on a CUDA device only (device=0), as the reference")
    extra = dict(dynamic=args.dynamic, nms=args.nms)
    if args.nms:
        extra.update(conf=args.conf, iou=args.iou)
    if args.quantize == 16:
        extra["quantize"] = 16
    dst, _ = reference_export(args.src, args.dst, "torchscript", args.imgsz, args.batch, args.device, **extra)
    print(f"{dst}: TorchScript, {precision_name(args.quantize)}, "
          f"{'any batch and size (multiples of 32)' if args.dynamic else f'input ({args.batch}, 3, {args.imgsz}, {args.imgsz})'}"
          f"{f', NMS inside (conf {args.conf}, iou {args.iou})' if args.nms else ''}")
