"""lucid-yolo from Python: the Ultralytics-style ``YOLO`` API over lucid's native trainer.

``from lucid_yolo import YOLO`` is the only change a script written for the Ultralytics package's
``YOLO`` needs for segmentation (docs/python.md lists what is supported and where lucid differs).
"""
import os
from pathlib import Path

# The native module links the LibTorch of the installed torch wheel; importing torch first loads its
# shared libraries (and their CUDA dependencies) into the process, as torchvision's C++ ops do.
import torch  # noqa: F401

_here = Path(__file__).resolve().parent
# The model YAMLs and export scripts the wheel ships, for the native lookups (config/model_yaml.cpp,
# cli/export_command.cpp); a build from the source tree finds them there without these.
if (_here / "models").is_dir():
    os.environ.setdefault("LUCID_MODELS_DIR", str(_here / "models"))
if (_here / "scripts").is_dir():
    os.environ.setdefault("LUCID_SCRIPTS_DIR", str(_here / "scripts"))

from ._lucid import LucidError, register_network_loader, version  # noqa: E402
from .runtimes import open_onnx  # noqa: E402
from .model import YOLO  # noqa: E402
from .results import Boxes, Masks, Results  # noqa: E402
from .metrics import Metric, SegmentMetrics  # noqa: E402

# YOLO("best.onnx"): the file's network in onnxruntime behind the native predictor.
register_network_loader(".onnx", open_onnx)

__version__ = version()
__all__ = ["YOLO", "Results", "Boxes", "Masks", "Metric", "SegmentMetrics", "LucidError", "__version__"]
