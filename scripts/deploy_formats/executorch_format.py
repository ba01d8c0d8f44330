"""format=executorch: torch.export of the model, lowered to the XNNPACK backend and written as an
ExecuTorch program (a folder with model.pte and metadata.yaml, the reference's layout), which the
ExecuTorch runtime runs (its Python bindings: executorch.runtime). The reference exports the
one-to-many head for this format (no top-k), so outputs are dense and NMS runs afterwards."""
import os
import sys
from pathlib import Path

from .common import reference_export, require


def add_arguments(a):
    pass


def export(args):
    require("format=executorch", ("executorch", "executorch==1.2.0"))
    if args.quantize:
        sys.exit("format=executorch: FP32 only (half= and int8= are for onnx and openvino)")
    if "FLATC_EXECUTABLE" not in os.environ:  # the serializer's flatbuffer compiler, shipped in the wheel
        import importlib.util

        root = Path(list(importlib.util.find_spec("executorch").submodule_search_locations)[0])
        os.environ["FLATC_EXECUTABLE"] = str(root / "data" / "bin" / "flatc")
    dst, _ = reference_export(args.src, args.dst, "executorch", args.imgsz, args.batch, "cpu")
    if not (Path(dst) / "model.pte").is_file():
        sys.exit(f"format=executorch: {dst} lacks model.pte")
    print(f"{dst}: ExecuTorch program model.pte (XNNPACK), FP32, input ({args.batch}, 3, {args.imgsz}, {args.imgsz})")
