"""format=openvino: an IR folder (model.xml, model.bin, metadata.yaml) that the OpenVINO runtime runs
on the CPU, converted from the ONNX file lucid writes (--onnx: openvino.convert_model of it, its
metadata as metadata.yaml, the reference's reading of it); half=True stores FP16 weights. int8=True
quantizes that model with NNCF's post-training calibration (nncf.quantize, mixed preset) over the
images lucid letterboxed from the validation split of data= (--calibration: a safetensors file of
uint8 (N, 3, H, W) RGB images), with the head's decode and sigmoids left in floating point, as the
reference's exporter leaves them."""
import json
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

from .common import onnx_metadata, place, precision_name, require


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)
    a.add_argument("--data", default="")
    a.add_argument("--fraction", type=float, default=1.0)
    a.add_argument("--onnx", default="", help="lucid's ONNX file of the model")
    a.add_argument("--calibration", default="",
                   help="int8: the calibration images lucid letterboxed from data= (safetensors, 'images' uint8 (N, 3, H, W) RGB)")


def export(args):
    require("format=openvino", ("openvino", "openvino==2026.4.1"))
    if not args.onnx:
        sys.exit("format=openvino: no ONNX file of the model was given (--onnx)")
    quantize, extra_args, calibrated = None, {}, ""
    if args.quantize == 8:
        require("format=openvino int8=True (NNCF calibration)", ("nncf", "nncf==3.4.0"))
        if not args.calibration or not Path(args.calibration).is_file():
            sys.exit(f"format=openvino int8=True: no calibration images of data={args.data} were given "
                     "(--calibration, which lucid export writes)")
        images = CalibrationImages(args.calibration, args.batch, args.dynamic)
        quantize = partial(int8_model, images=images)
        extra_args = {"int8": True, "data": args.data, "fraction": args.fraction}
        calibrated = f", calibrated on {images.count} image{'s' * (images.count != 1)} of {args.data}"
    dst = from_onnx(args.onnx, args.dst, args.quantize == 16, quantize, extra_args)
    xml = sorted(Path(dst).glob("*.xml"))
    if len(xml) != 1 or not xml[0].with_suffix(".bin").is_file():
        sys.exit(f"format=openvino: {dst} lacks its .xml/.bin pair")
    print(f"{dst}: OpenVINO IR {xml[0].name}, {precision_name(args.quantize)}, "
          f"{'dynamic input' if args.dynamic else f'input ({args.batch}, 3, {args.imgsz}, {args.imgsz})'}{calibrated}")


class CalibrationImages:
    """The calibration file's images as NNCF reads them, batch by batch from the memory-mapped file:
    FP32 in [0, 1], in batches of min(batch, N) with the incomplete last one dropped and, for a fixed
    input larger than N, the images repeated up to its batch (the reference's calibration loader and
    its transform)."""

    def __init__(self, path, batch, dynamic):
        from safetensors import safe_open

        self.path = path
        with safe_open(path, framework="numpy") as f:
            if "images" not in f.keys():
                sys.exit(f"format=openvino int8=True: {path} holds no 'images' tensor")
            shape = f.get_slice("images").get_shape()
        if len(shape) != 4 or shape[1] != 3 or shape[0] < 1:
            sys.exit(f"format=openvino int8=True: {path}: expected (N, 3, H, W) images with N >= 1, not {shape}")
        self.count = shape[0]
        self.step = min(batch, self.count)
        self.batch = self.step if dynamic else batch

    def __len__(self):
        return self.count // self.step

    def __iter__(self):
        import numpy as np
        from safetensors import safe_open

        with safe_open(self.path, framework="numpy") as f:
            images = f.get_slice("images")
            for i in range(len(self)):
                x = images[i * self.step:(i + 1) * self.step].astype(np.float32) / 255.0
                if len(x) < self.batch:
                    x = np.tile(x, (-(-self.batch // len(x)), 1, 1, 1))[:self.batch]
                yield x


def decode_scope(model):
    """The operations the reference's exporter keeps out of INT8 (its ignored scope: every sigmoid, and
    the head module's own operations, the decode after the branches' last convolutions), found in the
    IR of lucid's ONNX by what they compute: every Sigmoid, and everything output0 is computed from
    back to the branches' convolutions (those and their biases are quantized, as the reference's; the
    DFL's convolution, which reads a Softmax, belongs to the decode). The anchors of a dynamic input
    read only the features' shapes (ShapeOf), where the walk stops."""
    def is_branch_conv(node):
        if node.get_type_name() == "Add":  # a convolution's bias
            sources = [i.get_source_output().get_node() for i in node.inputs()]
            return (any(s.get_type_name() == "Constant" for s in sources)
                    and any(s.get_type_name() == "Convolution" and is_branch_conv(s) for s in sources))
        return (node.get_type_name() == "Convolution"
                and node.input_value(0).get_node().get_type_name() not in ("Softmax", "SoftMax"))

    names = {op.get_friendly_name() for op in model.get_ordered_ops() if op.get_type_name() == "Sigmoid"}
    output0 = next(r for r in model.get_results() if "output0" in r.input_value(0).get_names())
    stack, seen = [output0.input_value(0).get_node()], set()
    while stack:
        node = stack.pop()
        name = node.get_friendly_name()
        if name in seen or node.get_type_name() in ("Constant", "Parameter") or is_branch_conv(node):
            continue
        seen.add(name)
        names.add(name)
        if node.get_type_name() != "ShapeOf":
            stack.extend(i.get_source_output().get_node() for i in node.inputs())
    return sorted(names)


def int8_model(model, images):
    import logging

    import nncf

    nncf.set_log_level(logging.WARNING)  # not its line per operation left unquantized
    if len(images) < 1:
        sys.exit(f"format=openvino int8=True: {images.path} holds no calibration batch")
    return nncf.quantize(model=model, calibration_dataset=nncf.Dataset(images), preset=nncf.QuantizationPreset.MIXED,
                         subset_size=len(images), ignored_scope=nncf.IgnoredScope(names=decode_scope(model)))


def yaml_value(v):
    """A metadata value as YAML (JSON's forms are YAML's flow forms)."""
    if isinstance(v, dict):
        return "\n" + "".join(f"  {json.dumps(k) if isinstance(k, str) else k}: {json.dumps(x)}\n" for k, x in v.items()).rstrip("\n")
    return json.dumps(v)


def from_onnx(onnx_file, dst, half, transform=None, extra_args=None):
    """The IR of lucid's ONNX file (transform(model) of it where given: the INT8 route), with the file's
    metadata (Python literals where the reference writes them so; its args with half and extra_args
    as this IR has them) as metadata.yaml beside it, moved to dst."""
    import openvino as ov

    meta = onnx_metadata(onnx_file)
    if isinstance(meta.get("args"), dict):
        meta["args"] = {**meta["args"], "half": half, **(extra_args or {})}
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=Path(dst).parent))
    try:
        folder = work / Path(dst).name
        folder.mkdir()
        model = ov.convert_model(onnx_file)
        if transform is not None:
            model = transform(model)
        ov.save_model(model, str(folder / "model.xml"), compress_to_fp16=half)
        (folder / "metadata.yaml").write_text("".join(f"{k}: {yaml_value(v)}\n" for k, v in meta.items()))
        place(folder, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Path(dst)
