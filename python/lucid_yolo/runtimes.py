"""Exported files run by another runtime behind lucid's predictor (python/src/python_network.h):
``YOLO("best.onnx").predict(...)`` letterboxes, decodes and draws exactly as for the weights, with
the file's network run by onnxruntime. The file's metadata (the reference's, which lucid's ONNX
writer and exporters write: names, imgsz, batch, stride, end2end, args) gives the class names, the
input it takes and the layout of its outputs (docs/deploy.md)."""
import ast

import numpy as np


def _literal(value, default=None):
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError):
        return default


def _providers(ort, device):
    """onnxruntime's CUDA provider where the device is a GPU and this onnxruntime has it, else the CPU."""
    if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
        index = device.split(":")[1] if ":" in device else "0"
        return [("CUDAExecutionProvider", {"device_id": int(index)})], f"cuda:{index}"
    return ["CPUExecutionProvider"], "cpu"


def open_onnx(path, device):
    """The network of an ONNX file (lucid's or the reference's export of a segmentation model) as the
    native predictor takes it: run(images) -> (output0, output1), and what the metadata says."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("an ONNX file runs in onnxruntime, which this Python lacks: pip install onnxruntime") from None
    providers, where = _providers(ort, device)
    try:
        session = ort.InferenceSession(str(path), providers=providers)
    except Exception as e:  # onnxruntime raises its own exception types for unreadable files
        raise ValueError(f"not an ONNX model onnxruntime loads ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    meta = session.get_modelmeta().custom_metadata_map
    names = _literal(meta.get("names", ""), {})
    imgsz = _literal(meta.get("imgsz", ""), None)
    if meta.get("task") != "segment" or not isinstance(names, dict) or not names or \
            not (isinstance(imgsz, list) and len(imgsz) == 2):
        raise ValueError("its metadata is not a segmentation model's export metadata (names, imgsz, task segment): "
                         "export it with lucid export format=onnx")
    args = _literal(meta.get("args", ""), {}) or {}
    inputs = session.get_inputs()
    if len(inputs) != 1 or len(session.get_outputs()) != 2:
        raise ValueError("expected one input (images) and two outputs (output0, output1)")
    shape = inputs[0].shape  # (B, 3, H, W); names instead of numbers where dynamic
    dynamic = not all(isinstance(d, int) for d in shape)
    batch = shape[0] if isinstance(shape[0], int) else None
    half = "float16" in inputs[0].type
    if not dynamic and imgsz[0] != imgsz[1]:
        raise ValueError(f"a fixed input of {imgsz[0]}x{imgsz[1]}: lucid predicts square fixed-shape files")
    name = inputs[0].name

    def run(images):
        x = images.astype(np.float16) if half else images
        n = x.shape[0]
        step = batch or n
        out0, out1 = [], []
        for i in range(0, n, step):  # a fixed batch: chunks of it, the last padded with zero images
            chunk = x[i:i + step]
            k = chunk.shape[0]
            if k < step:
                chunk = np.concatenate([chunk, np.zeros((step - k, *chunk.shape[1:]), chunk.dtype)])
            y0, y1 = session.run(None, {name: chunk})
            out0.append(y0[:k].astype(np.float32))
            out1.append(y1[:k].astype(np.float32))
        return np.concatenate(out0), np.concatenate(out1)

    return {"run": run, "names": [str(names[i]) for i in sorted(names)], "imgsz": int(imgsz[0]),
            "fixed_imgsz": not dynamic, "end2end": bool(_literal(meta.get("end2end", ""), False)) or bool(args.get("nms")),
            "stride": int(meta.get("stride", 32)), "device": where}
