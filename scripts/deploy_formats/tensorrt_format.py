"""format=engine (TensorRT): TensorRT's Python package parses the ONNX file lucid writes (--onnx:
FP32, an end-to-end model's one-to-one head, dynamic with dynamic=True) and builds a serialized
engine on a CUDA device: FP16 kernels allowed with half=True (TensorRT 10 and earlier: the builder's
FP16 flag; TensorRT 11, strongly typed only: the ONNX converted to mixed precision by NVIDIA
ModelOpt's AutoCast first), workspace= the builder's workspace limit in GiB, and with dynamic=True
one optimization profile: smallest (1, 3, 32, 32), optimal the export's (batch, 3, imgsz, imgsz),
largest (batch, 3, 2 imgsz, 2 imgsz), as the reference's exporter; an end-to-end model's smallest
height and width are raised to the first multiple of the stride whose anchors fill its top-k. The
file is the reference's: a 4-byte little-endian length, the ONNX file's metadata as that many bytes
of JSON, then the engine, which the reference's predictor and TensorRT's runtime (after the header)
load. Where TensorRT or a GPU is missing the error says which, and the ONNX route (format=onnx, then
trtexec or TensorRT's ONNX parser on the target machine)."""
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import onnx_metadata, precision_name

ONNX_ROUTE = ("export format=onnx and build the engine on the target machine "
              "(trtexec --onnx=best.onnx --saveEngine=best.engine)")
MIN_SIZE = 32  # the smallest height and width of a dynamic engine's profile, as the reference's


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--workspace", type=float, default=0)
    a.add_argument("--onnx", default="", help="lucid's ONNX file of the model")


def export(args):
    import torch

    if importlib.util.find_spec("tensorrt") is None:
        sys.exit(f"format=engine needs NVIDIA TensorRT's Python package (tensorrt-cu{(torch.version.cuda or '13').split('.')[0]}) "
                 f"and a CUDA device; {sys.executable} has no tensorrt. Install it, or {ONNX_ROUTE}")
    if not args.device.startswith("cuda") or not torch.cuda.is_available():
        sys.exit(f"format=engine builds on a CUDA device (device=0); none is usable here. Or {ONNX_ROUTE}")
    if args.quantize == 8:
        sys.exit("format=engine: int8=True is for format=openvino here")
    if not args.onnx or not Path(args.onnx).is_file():
        sys.exit("format=engine: no ONNX file of the model was given (--onnx; lucid export writes it)")
    torch.cuda.set_device(torch.device(args.device))  # TensorRT builds for the current CUDA device
    meta = onnx_metadata(args.onnx)
    meta["args"] = {**meta.get("args", {}), "half": args.quantize == 16, "workspace": args.workspace or None}
    dst = Path(args.dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        plan, version = build(args, args.onnx, work, meta)
        tmp = work / dst.name
        header = json.dumps(meta).encode()  # ASCII (json.dumps escapes the rest), so its length in bytes
        with open(tmp, "wb") as f:
            f.write(len(header).to_bytes(4, byteorder="little", signed=True))
            f.write(header)
            f.write(memoryview(plan))
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shape = "dynamic input" if args.dynamic else f"input ({args.batch}, 3, {args.imgsz}, {args.imgsz})"
    print(f"{dst}: TensorRT {version} engine, {precision_name(args.quantize)}, {shape}")


def anchors(size, stride):
    """The anchors of a size x size input over the three levels (stride / 4, stride / 2, stride)."""
    return sum((size // s) ** 2 for s in (stride // 4, stride // 2, stride))


def build(args, onnx_file, work, meta):
    """(the serialized engine, TensorRT's version) of the ONNX file."""
    import tensorrt as trt

    version = trt.__version__
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) < (8, 5):  # the one-to-one head's Mod, and the builder API used here
        sys.exit(f"format=engine needs TensorRT 8.5 or later; this Python has {version}. Or {ONNX_ROUTE}")
    half = args.quantize == 16
    if half and major >= 11:  # strongly typed networks only: the precision is the ONNX file's
        onnx_file = mixed_precision(onnx_file, work)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    # explicit batch: the only mode from TensorRT 10 (its flag removed in 11)
    network = builder.create_network(0 if major >= 10 else 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_file)):
        errors = "; ".join(parser.get_error(i).desc() for i in range(parser.num_errors))
        sys.exit(f"format=engine: TensorRT {version}'s ONNX parser refused lucid's ONNX file: {errors or 'no message'}")
    config = builder.create_builder_config()
    if args.workspace:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(args.workspace * (1 << 30)))
    if half and major < 11:
        config.set_flag(trt.BuilderFlag.FP16)
    if args.dynamic:
        config.add_optimization_profile(profile(builder, network, args, meta))
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        sys.exit(f"format=engine: TensorRT {version}'s builder made no engine (its messages are above)")
    return plan, version


def profile(builder, network, args, meta):
    """The optimization profile of a dynamic engine: each dynamic dimension of the input from its
    smallest (batch 1, height and width MIN_SIZE, raised for an end-to-end model until its anchors
    fill the top-k) through the export's batch and imgsz (optimal) to batch and 2 imgsz (largest)."""
    stride = int(meta.get("stride", 32))
    smallest = max(MIN_SIZE, stride)
    if meta.get("end2end"):
        outputs = {network.get_output(i).name: network.get_output(i) for i in range(network.num_outputs)}
        k = int(outputs["output0"].shape[1]) if "output0" in outputs else 0
        while smallest < args.imgsz and anchors(smallest, stride) < k:
            smallest += stride
    low = (1, 3, smallest, smallest)
    opt = (args.batch, 3, args.imgsz, args.imgsz)
    high = (args.batch, 3, 2 * args.imgsz, 2 * args.imgsz)
    p = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        x = network.get_input(i)
        dims = tuple(x.shape)

        def fill(bound):  # the dynamic (-1) dimensions from bound, the fixed ones kept
            return tuple(b if d == -1 else d for d, b in zip(dims, bound))

        p.set_shape(x.name, min=fill(low), opt=fill(opt), max=fill(high))
    return p


def mixed_precision(onnx_file, work):
    """TensorRT 11's FP16: the ONNX file converted to FP16 with FP32 inputs and outputs by NVIDIA
    ModelOpt's AutoCast (nodes whose activations overflow FP16 stay FP32)."""
    if importlib.util.find_spec("modelopt") is None:
        sys.exit("format=engine half=True: TensorRT 11 builds FP16 only from a mixed-precision ONNX file, "
                 "which NVIDIA ModelOpt converts; this Python has no modelopt (pip install nvidia-modelopt[onnx]), "
                 "or build with TensorRT 10, or export half=False")
    import onnx
    from modelopt.onnx import autocast

    out = work / "model.fp16.onnx"
    onnx.save(autocast.convert_to_mixed_precision(onnx_path=str(onnx_file), low_precision_type="fp16",
                                                  keep_io_types=True), str(out))
    return out
