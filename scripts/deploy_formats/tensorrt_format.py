"""format=engine (TensorRT): the reference builds a serialized engine from its ONNX export with the
TensorRT Python package on a CUDA device. Where TensorRT or a GPU is missing the error says which,
and the ONNX route (format=onnx, then trtexec or TensorRT's ONNX parser on the target machine)."""
import importlib.util
import sys

from .common import precision_name, reference_export

ONNX_ROUTE = ("export format=onnx and build the engine on the target machine "
              "(trtexec --onnx=best.onnx --saveEngine=best.engine)")


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--workspace", type=float, default=0)


def export(args):
    import torch

    if importlib.util.find_spec("tensorrt") is None:
        sys.exit(f"format=engine needs NVIDIA TensorRT's Python package (tensorrt-cu{(torch.version.cuda or '13').split('.')[0]}) "
                 f"and a CUDA device; {sys.executable} has no tensorrt. Install it, or {ONNX_ROUTE}")
    if not args.device.startswith("cuda") or not torch.cuda.is_available():
        sys.exit(f"format=engine builds on a CUDA device (device=0); none is usable here. Or {ONNX_ROUTE}")
    extra = dict(dynamic=args.dynamic, nms=False)
    if args.workspace:
        extra["workspace"] = args.workspace
    if args.quantize == 16:
        extra["quantize"] = 16
    elif args.quantize == 8:
        sys.exit("format=engine: int8=True is for format=openvino here")
    dst, _ = reference_export(args.src, args.dst, "engine", args.imgsz, args.batch, args.device, **extra)
    print(f"{dst}: TensorRT engine, {precision_name(args.quantize)}, input ({args.batch}, 3, {args.imgsz}, {args.imgsz})")
