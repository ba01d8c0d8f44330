"""format=onnx: the reference's ONNX exporter (torch.onnx), with its simplifier (onnxslim), dynamic
axes, FP16 conversion and end-to-end NMS (nms=True: the reference's NMSModel, torchvision NMS traced
into the graph as NonMaxSuppression over the one-to-many head)."""
import sys

from .common import precision_name, reference_export, require


def add_arguments(a):
    a.add_argument("--opset", type=int, default=0)
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--simplify", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def export(args):
    require("format=onnx", ("onnx", "onnx"))
    if args.simplify:
        require("format=onnx simplify=True (the default, as the reference's; simplify=False skips it)",
                ("onnxslim", "onnxslim==0.1.98"))
    if args.quantize == 16 and not args.device.startswith("cuda"):
        require("format=onnx half=True on the CPU (the FP16 conversion)", ("onnxruntime", "onnxruntime"))
    import onnx
    from onnx import TensorProto

    extra = dict(dynamic=args.dynamic, simplify=args.simplify, nms=args.nms)
    if args.nms:
        extra.update(conf=args.conf, iou=args.iou)
    if args.opset:
        extra["opset"] = args.opset
    if args.quantize == 16:
        extra["quantize"] = 16
    dst, warnings = reference_export(args.src, args.dst, "onnx", args.imgsz, args.batch, args.device, **extra)
    failed = [w for w in warnings if "simplifier failure" in w]
    if failed:  # the reference writes the unsimplified graph then; simplify=True promised otherwise
        sys.exit(f"format=onnx simplify=True: onnxslim failed ({failed[0]}); export with simplify=False")
    graph = onnx.load(str(dst))
    names = [o.name for o in graph.graph.output]
    if names != ["output0", "output1"]:
        sys.exit(f"format=onnx: the exporter wrote outputs {names}, expected output0 and output1")
    if args.quantize == 16 and TensorProto.FLOAT16 not in {t.data_type for t in graph.graph.initializer}:
        sys.exit("format=onnx half=True: the exporter's FP16 conversion did not happen (see its warning above)")
    used = max((o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")), default=0)
    shape = "dynamic batch, height and width" if args.dynamic else f"input ({args.batch}, 3, {args.imgsz}, {args.imgsz})"
    print(f"{dst}: ONNX opset {used}, {precision_name(args.quantize)}, {shape}"
          f"{', simplified' if args.simplify else ''}{f', NMS inside (conf {args.conf}, iou {args.iou})' if args.nms else ''}")
