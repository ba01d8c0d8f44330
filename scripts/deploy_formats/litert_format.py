"""format=litert (lucid's format=tflite too): litert-torch converts the model in export mode to a
LiteRT flatbuffer (.tflite, the reference's metadata appended as metadata.json), which the LiteRT
interpreter (ai-edge-litert) runs. FP32; an end-to-end model exports its one-to-one head (rows in
input pixels); the box coordinates of a dense output (yolov8, yolo11) are normalised by the input
size, as the reference writes them."""
import sys

from .common import reference_export, require


def add_arguments(a):
    pass


def export(args):
    require("format=litert", ("litert_torch", "litert-torch==0.10.0"), ("ai_edge_litert", "ai-edge-litert==2.3.0"))
    if args.quantize:
        sys.exit("format=litert: FP32 only here (half= and int8= are for onnx and openvino)")
    # nms=False: an end-to-end model keeps its one-to-one head, as in every lucid export
    dst, _ = reference_export(args.src, args.dst, "litert", args.imgsz, args.batch, "cpu", nms=False)
    print(f"{dst}: LiteRT (TFLite) flatbuffer, FP32, input ({args.batch}, 3, {args.imgsz}, {args.imgsz})")
