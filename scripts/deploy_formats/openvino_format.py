"""format=openvino: an IR folder (model.xml, model.bin, metadata.yaml) that the OpenVINO runtime runs
on the CPU. From the ONNX file lucid writes (--onnx: openvino.convert_model of it, its metadata as
metadata.yaml, the reference's reading of it); half=True stores FP16 weights. int8=True is the
reference's route: its exporter quantizes with NNCF's post-training calibration over the validation
images of data= (its calibration loader and ignored scope: the head's decode and sigmoids stay in
floating point)."""
import ast
import json
import shutil
import sys
import tempfile
from pathlib import Path

from .common import place, precision_name, reference_export, require


def add_arguments(a):
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)
    a.add_argument("--data", default="")
    a.add_argument("--fraction", type=float, default=1.0)
    a.add_argument("--onnx", default="", help="lucid's ONNX file of the model (every route but int8)")


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
        dst, _ = reference_export(args.src, args.dst, "openvino", args.imgsz, args.batch, "cpu", **extra)
    elif args.onnx:
        dst = from_onnx(args.onnx, args.dst, args.quantize == 16)
    else:
        sys.exit("format=openvino: no ONNX file of the model was given (--onnx)")
    xml = sorted(Path(dst).glob("*.xml"))
    if len(xml) != 1 or not xml[0].with_suffix(".bin").is_file():
        sys.exit(f"format=openvino: {dst} lacks its .xml/.bin pair")
    print(f"{dst}: OpenVINO IR {xml[0].name}, {precision_name(args.quantize)}, "
          f"{'dynamic input' if args.dynamic else f'input ({args.batch}, 3, {args.imgsz}, {args.imgsz})'}"
          f"{f', calibrated on {args.data}' if args.quantize == 8 else ''}")


def yaml_value(v):
    """A metadata value as YAML (JSON's forms are YAML's flow forms)."""
    if isinstance(v, dict):
        return "\n" + "".join(f"  {json.dumps(k) if isinstance(k, str) else k}: {json.dumps(x)}\n" for k, x in v.items()).rstrip("\n")
    return json.dumps(v)


def from_onnx(onnx_file, dst, half):
    """The IR of lucid's ONNX file, with the file's metadata (Python literals where the reference
    writes them so) as metadata.yaml beside it, moved to dst."""
    import onnx
    import openvino as ov

    meta = {}
    for p in onnx.load(onnx_file, load_external_data=False).metadata_props:
        try:
            meta[p.key] = ast.literal_eval(p.value)
        except (ValueError, SyntaxError):
            meta[p.key] = p.value
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=Path(dst).parent))
    try:
        folder = work / Path(dst).name
        folder.mkdir()
        ov.save_model(ov.convert_model(onnx_file), str(folder / "model.xml"), compress_to_fp16=half)
        (folder / "metadata.yaml").write_text("".join(f"{k}: {yaml_value(v)}\n" for k, v in meta.items()))
        place(folder, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Path(dst)
