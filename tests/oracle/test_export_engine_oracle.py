"""`lucid export format=engine` (a TensorRT engine, built by the reference's exporter from its ONNX
export on a CUDA device). Where TensorRT's Python package is absent (the CI machine) the export fails
with one line naming the package to install and the ONNX route; where a CUDA device is missing too,
the same. Where TensorRT and a CUDA device are present, an engine is built from seeded yolo26n-seg
weights (running it against `lucid predict` is not part of this test)."""
import importlib.util
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import LUCID, expect_error  # noqa: E402
from oracle_common import run  # noqa: E402


def main():
    import os

    import torch

    failures = []
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        weights = tmp / "yolo26.safetensors"
        run([LUCID, "model", "save", "model=yolo26n-seg.yaml", "nc=3", f"out={weights}"])
        if importlib.util.find_spec("tensorrt") is None:
            expect_error([f"model={weights}", "format=engine", "imgsz=128"], "tensorrt-cu", env, failures)
            expect_error([f"model={weights}", "format=engine", "imgsz=128", "device=0"], "format=onnx", env, failures)
        elif not torch.cuda.is_available():
            expect_error([f"model={weights}", "format=engine", "imgsz=128"], "CUDA device", env, failures)
        else:
            out = tmp / "model.engine"
            print(run([LUCID, "export", f"model={weights}", "format=engine", "imgsz=128", "device=0", f"out={out}"]))
            if not out.is_file():
                failures.append(f"no {out}")
        expect_error([f"model={weights}", "format=engine", "nms=True"], "option nms=", env, failures)
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
