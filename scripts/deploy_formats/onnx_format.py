"""format=onnx where lucid was built without the ONNX library (libonnx-dev): torch.onnx's exporter
(torch.export, then onnxscript) of lucid's network (lucid_yolo/nn, BatchNorms folded), in the layout
lucid's own writer gives (docs/deploy.md: nms unset: the dense one-to-many output; nms=False: an
end-to-end model's one-to-one top-k; nms=True: NMS inside), with the reference's metadata; dynamic
axes, FP16 (onnxruntime's float16 conversion, inputs and outputs kept FP32) and onnxslim's
simplification as the options ask."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import deployed_network, example_input, metadata, precision_name, require


def add_arguments(a):
    a.add_argument("--opset", type=int, default=0)
    a.add_argument("--dynamic", action="store_true")
    a.add_argument("--simplify", action="store_true")
    a.add_argument("--nms", action="store_true")
    a.add_argument("--conf", type=float, default=0.25)
    a.add_argument("--iou", type=float, default=0.7)


def export(args):
    require("format=onnx", ("onnx", "onnx"), ("onnxscript", "onnxscript==0.7.2"))
    if args.simplify:
        require("format=onnx simplify=True (the default, as the reference's; simplify=False skips it)",
                ("onnxslim", "onnxslim==0.1.98"))
    if args.quantize == 16:
        require("format=onnx half=True (the FP16 conversion)", ("onnxruntime", "onnxruntime"))
    if args.nms and args.dynamic:
        sys.exit("format=onnx nms=True dynamic=True: this exporter traces the NMS for a fixed batch; give "
                 "dynamic=False, or use a lucid built with libonnx-dev (its own ONNX writer takes both)")
    import onnx
    import torch

    layout = "nms" if args.nms else None if args.one_to_one else "dense"
    deployed, names = deployed_network(args.src, nms=False, layout=layout, conf=args.conf, iou=args.iou)
    opset = args.opset or 18
    dynamic = None
    if args.dynamic:
        dims = {0: torch.export.Dim("batch"), 2: torch.export.Dim.AUTO, 3: torch.export.Dim.AUTO}
        dynamic = (dims,)
    dst = Path(args.dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        tmp = work / dst.name
        torch.onnx.export(deployed, (example_input(args.batch, args.imgsz),), str(tmp), input_names=["images"],
                          output_names=["output0", "output1"], opset_version=opset, dynamo=True,
                          dynamic_shapes=dynamic, external_data=False, verbose=False)
        model = onnx.load(str(tmp))
        if args.simplify:
            import onnxslim

            model = onnxslim.slim(model)
        if args.quantize == 16:
            from onnxruntime.transformers.float16 import convert_float_to_float16

            model = convert_float_to_float16(model, keep_io_types=True)
        meta = metadata(deployed, names, args.imgsz, args.batch,
                        {"batch": args.batch, "half": args.quantize == 16, "nms": args.nms if args.nms or args.one_to_one else None,
                         "dynamic": args.dynamic, "opset": opset})
        del model.metadata_props[:]
        for k, v in meta.items():
            model.metadata_props.add(key=k, value=repr(v) if isinstance(v, (dict, list, bool)) or v is None else str(v))
        onnx.save(model, str(tmp))
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shape = "dynamic batch, height and width" if args.dynamic else f"input ({args.batch}, 3, {args.imgsz}, {args.imgsz})"
    print(f"{dst}: ONNX opset {opset}, {precision_name(args.quantize)}, {shape}"
          f"{', simplified' if args.simplify else ''}{f', NMS inside (conf {args.conf}, iou {args.iou})' if args.nms else ''}")
