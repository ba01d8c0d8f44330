"""format=litert (lucid's format=tflite too): litert-torch converts lucid's network (lucid_yolo/nn,
BatchNorms folded) to a LiteRT flatbuffer (.tflite) with the reference's metadata appended as the zip
entry metadata.json (the flatbuffer tolerates the appended zip; the reference's predictor reads it
there), which the LiteRT interpreter (ai-edge-litert) runs. FP32; an end-to-end model exports its
one-to-one top-k (rows in input pixels); a dense output (yolov8, yolo11) has its box coordinates
divided by the input's width and height, as the reference writes them (its predictor multiplies them
back)."""
import json
import os
import shutil
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

from .common import deployed_network, example_input, metadata, require


def add_arguments(a):
    pass


def convert(deployed, im, file):
    """The .tflite of the network traced on im, written to file."""
    import litert_torch
    import torch

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the libraries' own deprecation notices
        litert_torch.convert(deployed.eval(), (im,)).export(str(file))


def export(args):
    require("format=litert", ("litert_torch", "litert-torch==0.10.0"), ("ai_edge_litert", "ai-edge-litert==2.3.0"))
    if args.quantize:
        sys.exit("format=litert: FP32 only here (half= and int8= are for onnx and openvino)")
    # nms=False: an end-to-end model keeps its one-to-one head, as in every lucid export; the dense
    # output of the others is normalized (the reference's predictor scales it back by the input size)
    deployed, names = deployed_network(args.src, nms=False, normalized=True)
    im = example_input(args.batch, args.imgsz)
    meta = metadata(deployed, names, args.imgsz, args.batch, {"batch": args.batch})
    dst = Path(args.dst)
    if dst.is_dir():
        sys.exit(f"out={dst}: a folder; give a file name (.tflite)")
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        tmp = work / (dst.stem + ".tflite")
        convert(deployed, im, tmp)
        with zipfile.ZipFile(tmp, "a", zipfile.ZIP_DEFLATED) as z:
            z.writestr("metadata.json", json.dumps(meta))
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    layout = "one-to-one top-k rows" if deployed.layout == "one_to_one" else "dense output, boxes normalized"
    print(f"{dst}: LiteRT (TFLite) flatbuffer, FP32, input ({args.batch}, 3, {args.imgsz}, {args.imgsz}), {layout}")
