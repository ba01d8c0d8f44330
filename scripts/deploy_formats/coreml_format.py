"""format=coreml: coremltools converts the traced model to an ML Program (.mlpackage), the
reference's CoreML export. Core ML runs only on Apple systems: on Linux the package is converted and
its specification checked (inputs, outputs, metadata), not run."""
import sys

from .common import precision_name, reference_export, require


def add_arguments(a):
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def export(args):
    require("format=coreml", ("coremltools", "coremltools==9.0"))
    if args.quantize == 8:
        sys.exit("format=coreml: int8=True is for format=openvino")
    extra = dict(nms=args.nms)  # nms=False: an end-to-end model keeps its one-to-one head
    if args.nms:
        extra.update(conf=args.conf, iou=args.iou)
    if args.quantize == 16:
        extra["quantize"] = 16
    dst, _ = reference_export(args.src, args.dst, "coreml", args.imgsz, args.batch, "cpu", **extra)
    import coremltools as ct

    spec = ct.utils.load_spec(str(dst))
    ins = [i.name for i in spec.description.input]
    outs = [o.name for o in spec.description.output]
    print(f"{dst}: Core ML package (ML Program, spec version {spec.specificationVersion}), "
          f"{precision_name(args.quantize)}, input {ins} ({args.batch}, 3, {args.imgsz}, {args.imgsz}), outputs {outs}")
