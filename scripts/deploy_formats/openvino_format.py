"""format=openvino: the reference's OpenVINO export (openvino.convert_model of the traced model; an IR
folder of model.xml, model.bin and metadata.yaml), which the OpenVINO runtime runs on the CPU.
half=True stores FP16 weights; int8=True quantizes with NNCF's post-training calibration over the
validation images of data= (the reference's calibration loader and ignored scope: the head's
decode and sigmoids stay in floating point)."""
import sys
from pathlib import Path

from .common import precision_name, reference_export, require


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)
    a.add_argument("--data", default="")
    a.add_argument("--fraction", type=float, default=1.0)


def export(args):
    require("format=openvino", ("openvino", "openvino==2026.4.1"))
    extra = dict(dynamic=args.dynamic, nms=args.nms)
    if args.nms:
        extra.update(conf=args.conf, iou=args.iou)
    if args.quantize == 8:
        require("format=openvino int8=True (NNCF calibration)", ("nncf", "nncf==3.4.0"))
        if not args.data or not Path(args.data).is_file():
            sys.exit(f"format=openvino int8=True: data={args.data} is not a dataset YAML (its validation images calibrate)")
        extra.update(quantize=8, data=args.data, fraction=args.fraction)
    elif args.quantize == 16:
        extra["quantize"] = 16
    dst, _ = reference_export(args.src, args.dst, "openvino", args.imgsz, args.batch, "cpu", **extra)
    xml = sorted(Path(dst).glob("*.xml"))
    if len(xml) != 1 or not xml[0].with_suffix(".bin").is_file():
        sys.exit(f"format=openvino: {dst} lacks its .xml/.bin pair")
    print(f"{dst}: OpenVINO IR {xml[0].name}, {precision_name(args.quantize)}, "
          f"{'dynamic input' if args.dynamic else f'input ({args.batch}, 3, {args.imgsz}, {args.imgsz})'}"
          f"{f', calibrated on {args.data}' if args.quantize == 8 else ''}")
