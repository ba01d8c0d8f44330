#!/usr/bin/env python3
"""Deployable forms of lucid weights (`lucid export format=...`), one module per format under
deploy_formats/: converted from the ONNX file lucid writes (--onnx: openvino, engine), or traced from
lucid's own PyTorch definition of the network (lucid_yolo/nn, the C++ model's state-dict names).
None imports the reference package:

  FORMAT IN.safetensors OUT --imgsz N [--batch B] [--device D] [--quantize 16|8] [format options]

  onnx         torch.onnx of lucid_yolo.nn, for a lucid built without libonnx-dev (--opset, --dynamic,
               --simplify, --nms --conf --iou, --one-to-one)
  aoti         an AOTInductor package (.pt2) of lucid_yolo.nn that LibTorch runs with no Python
  torchscript  torch.jit.trace of lucid_yolo.nn, the reference's metadata as config.txt (--dynamic, --nms)
  openvino     an OpenVINO IR folder from lucid's ONNX (--onnx FILE); --quantize 8 --calibration FILE:
               NNCF's INT8 calibration on the images lucid letterboxed from --data YAML
  litert       a LiteRT (TFLite) flatbuffer of lucid_yolo.nn through litert-torch, the reference's
               metadata appended (`lucid export` also takes format=tflite)
  executorch   an ExecuTorch program (XNNPACK) folder of lucid_yolo.nn's dense layout, as the reference's
  coreml       a Core ML ML Program (.mlpackage) of the traced lucid_yolo.nn (--nms)
  engine       a TensorRT engine built from lucid's ONNX (--onnx FILE; --dynamic, --workspace GiB,
               --quantize 16), the reference's metadata header first (needs TensorRT and a CUDA device)

The outputs of each are described in docs/deploy.md. A format's optional Python packages
(requirements-export.txt) are named in the error when absent. Failures exit non-zero with a message
naming the file, option or package.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_formats.common import require  # noqa: E402
from deploy_formats import (aoti_format, coreml_format, executorch_format, litert_format, onnx_format,  # noqa: E402
                            openvino_format, tensorrt_format, torchscript_format)

FORMATS = {
    "onnx": onnx_format,
    "aoti": aoti_format,
    "torchscript": torchscript_format,
    "openvino": openvino_format,
    "litert": litert_format,
    "executorch": executorch_format,
    "coreml": coreml_format,
    "engine": tensorrt_format,
}


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, module in FORMATS.items():
        a = sub.add_parser(name)
        a.add_argument("src")
        a.add_argument("dst")
        a.add_argument("--imgsz", type=int, required=True)
        a.add_argument("--batch", type=int, default=1)
        a.add_argument("--device", default="cpu")
        a.add_argument("--quantize", type=int, choices=(16, 8), default=None)
        a.add_argument("--one-to-one", action="store_true",
                       help="nms=False given: an end-to-end model's one-to-one head (format=onnx's unset nms is dense)")
        module.add_arguments(a)
    return p


def main(argv):
    args = parser().parse_args(argv)
    # Every format runs lucid's network (lucid_yolo/nn) or reads its weights: named first, in one line.
    require(f"format={args.cmd}", ("torch", "torch"), ("safetensors", "safetensors"))
    try:
        FORMATS[args.cmd].export(args)
    except (AssertionError, ValueError, RuntimeError, TypeError, ImportError, OSError) as e:
        # the reference's exporter reports unsupported inputs by raising; one line, not a traceback
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        sys.exit(f"format={args.cmd}: the exporter failed: {type(e).__name__}: {first}")


if __name__ == "__main__":
    main(sys.argv[1:])
