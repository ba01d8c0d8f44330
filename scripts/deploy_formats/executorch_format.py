"""format=executorch: torch.export of lucid's network (lucid_yolo/nn, BatchNorms folded) in the dense
layout, lowered to the XNNPACK backend and written as an ExecuTorch program: a folder with model.pte
and metadata.yaml (the reference's metadata, as its predictor reads it), which the ExecuTorch runtime
runs (its Python bindings: executorch.runtime). As the reference exports this format, every model
carries its one-to-many head (no top-k, end2end false): output0 (B, 4 + nc + nm, A) boxes cx cy w h
in input pixels, scores, mask coefficients, NMS afterwards; output1 the prototypes."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .common import deployed_network, example_input, metadata, place, require


def add_arguments(a):
    pass


def yaml_text(meta):
    """The metadata as YAML (JSON's scalars and lists are YAML flow forms; dicts one level deep as
    blocks), which the reference's predictor reads from metadata.yaml."""
    def value(v):
        if isinstance(v, dict) and v:
            return "".join(f"\n  {json.dumps(k) if isinstance(k, str) else k}: {json.dumps(x)}" for k, x in v.items())
        return " " + json.dumps(v)

    return "".join(f"{k}:{value(v)}\n" for k, v in meta.items())


def flatc():
    """The serializer's flatbuffer compiler, shipped in the executorch wheel, unless FLATC_EXECUTABLE names one."""
    if "FLATC_EXECUTABLE" not in os.environ:
        import importlib.util

        root = Path(list(importlib.util.find_spec("executorch").submodule_search_locations)[0])
        os.environ["FLATC_EXECUTABLE"] = str(root / "data" / "bin" / "flatc")


def program(deployed, im):
    """The ExecuTorch program (bytes) of the network: torch.export, XNNPACK partitions, to_executorch."""
    import warnings

    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the libraries' own deprecation notices, once per node
        exported = torch.export.export(deployed, (im,))
        return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def export(args):
    require("format=executorch", ("executorch", "executorch==1.2.0"))
    if args.quantize:
        sys.exit("format=executorch: FP32 only (half= and int8= are for onnx and openvino)")
    flatc()
    deployed, names = deployed_network(args.src, layout="dense")
    im = example_input(args.batch, args.imgsz)
    pte = program(deployed, im)
    meta = metadata(deployed, names, args.imgsz, args.batch, {"batch": args.batch})
    dst = Path(args.dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        folder = work / dst.name
        folder.mkdir()
        (folder / "model.pte").write_bytes(pte)
        (folder / "metadata.yaml").write_text(yaml_text(meta))
        place(folder, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{dst}: ExecuTorch program model.pte (XNNPACK), FP32, input ({args.batch}, 3, {args.imgsz}, {args.imgsz}), "
          f"dense output (one-to-many head, NMS afterwards)")
