"""format=coreml: coremltools converts lucid's traced network (lucid_yolo/nn, BatchNorms folded) to
an ML Program (.mlpackage) whose input is the RGB image `image` (pixels scaled by 1/255 inside), with
the reference's metadata: an end-to-end model's one-to-one rows (nms=False), or NMS inside (nms=True,
torchvision's NMS traced in and kept in FP32), else the dense output. Core ML runs only on Apple
systems: on Linux the package is converted and its specification checked (inputs, outputs,
metadata), not run."""
import shutil
import sys
import tempfile
from pathlib import Path

from .common import deployed_network, example_input, metadata, place, precision_name, require


def add_arguments(a):
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def convert(deployed, im, half):
    """The ML Program of the traced network: FP32 throughout, or FP16 weights and arithmetic (but the
    NMS's own box arithmetic, whose class-offset boxes lose their geometry in FP16)."""
    import coremltools as ct
    import torch

    traced = torch.jit.trace(deployed, im, strict=False, check_trace=False)
    precision = ct.precision.FLOAT32
    if half:
        precision = ct.precision.FLOAT16
        if deployed.layout == "nms":
            from coremltools.converters.mil.mil.scope import ScopeSource

            kept = [["div"], ["mul"], ["add"], ["cat"], ["torchvision::nms"]]
            precision = ct.transform.FP16ComputePrecision(
                op_selector=lambda op: op.scopes[ScopeSource.TORCHSCRIPT_MODULE_TYPE] not in kept)
    image = ct.ImageType("image", shape=tuple(im.shape), scale=1 / 255, color_layout=ct.colorlayout.RGB)
    return ct.convert(traced, inputs=[image], convert_to="mlprogram", compute_precision=precision, skip_model_load=True)


def export(args):
    require("format=coreml", ("coremltools", "coremltools==9.0"))
    if args.quantize == 8:
        sys.exit("format=coreml: int8=True is for format=openvino")
    deployed, names = deployed_network(args.src, args.nms, conf=args.conf, iou=args.iou)
    im = example_input(args.batch, args.imgsz)
    half = args.quantize == 16
    model = convert(deployed, im, half)
    meta = metadata(deployed, names, args.imgsz, args.batch,
                    {"batch": args.batch, "half": half, "nms": args.nms, "quantize": 16 if half else None})
    model.short_description = meta.pop("description")
    model.author = meta.pop("author")
    model.license = meta.pop("license")
    model.version = meta.pop("version")
    model.user_defined_metadata.update({k: str(v) for k, v in meta.items()})
    dst = Path(args.dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        tmp = work / dst.name
        model.save(str(tmp))
        place(tmp, dst, marker="Manifest.json")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import coremltools as ct

    spec = ct.utils.load_spec(str(dst))
    ins = [i.name for i in spec.description.input]
    outs = [o.name for o in spec.description.output]
    print(f"{dst}: Core ML package (ML Program, spec version {spec.specificationVersion}), "
          f"{precision_name(args.quantize)}, input {ins} ({args.batch}, 3, {args.imgsz}, {args.imgsz}), outputs {outs}")
