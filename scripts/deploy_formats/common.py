"""What every deployment format shares: the optional packages a format needs (named in the error when
absent), the device check, the folder placement, and, for the formats still made that way, the
reference's own exporter run on lucid's weights with the result moved to the requested path (the
only place the reference package is imported)."""
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

MAX_DET = 300  # rows of the end-to-end output, as the reference's export
EXTRAS = "requirements-export.txt"


def require(what, *packages):
    """Exits naming the pip packages (name==version as pinned in requirements-export.txt) that `what`
    needs and this Python lacks: (import name, pip requirement) pairs."""
    missing = [pip for module, pip in packages if importlib.util.find_spec(module) is None]
    if missing:
        sys.exit(f"{what} needs the Python package{'s' * (len(missing) > 1)} {', '.join(missing)} in "
                 f"{sys.executable}, which lacks {'them' if len(missing) > 1 else 'it'}: "
                 f"pip install {' '.join(missing)} (all export packages: pip install -r {EXTRAS} -c requirements.txt)")


def require_reference():
    """The packages the reference's exporter needs, or one line naming what is missing."""
    try:
        import torch  # noqa: F401
        import ultralytics  # noqa: F401
        import ultralytics_weights  # noqa: F401
    except ImportError as e:
        sys.exit(f"lucid export needs torch, safetensors and ultralytics in {sys.executable} "
                 f"(missing: {e.name or e}); set LUCID_PYTHON to the project's Python")


def check_device(device, fmt):
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"format={fmt} device={device}: no usable CUDA device for this Python's torch")


def reference_device(device):
    """The reference's spelling of a torch device: cpu, or the CUDA index."""
    return "cpu" if device == "cpu" else device.removeprefix("cuda:")


def place(produced, dst):
    """Moves an exported file or folder to dst. A folder replaces only an earlier export's folder
    (one holding metadata.yaml), never another folder."""
    produced, dst = Path(produced), Path(dst)
    if dst.is_dir():
        if not (dst / "metadata.yaml").is_file():
            sys.exit(f"out={dst}: an existing folder that is not an earlier export (no metadata.yaml); give another out=")
        shutil.rmtree(dst)
    elif produced.is_dir() and dst.exists():
        dst.unlink()
    os.replace(produced, dst)


def reference_export(src, dst, fmt, imgsz, batch, device, **args):
    """Builds the reference model with lucid's weights, runs the reference's exporter for `fmt`
    (YOLO.export, its converter and layout) and moves what it wrote to dst. The exporter's own
    progress goes to the log only at warning level (its messages name temporary files); returns
    (dst, the warnings it logged), which callers check for the fallbacks it takes on failures."""
    require_reference()
    from ultralytics import YOLO
    from ultralytics.utils import LOGGER
    from ultralytics_weights import reference_model, write_pt

    LOGGER.setLevel(logging.WARNING)
    warnings = []
    watcher = logging.Handler(logging.WARNING)
    watcher.emit = lambda record: warnings.append(record.getMessage())
    LOGGER.addHandler(watcher)
    check_device(device, fmt)
    model, cfg, _, _, data = reference_model(src)
    dst = Path(dst)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=dst.parent))
    try:
        pt = work / "model.pt"
        write_pt(model, cfg, imgsz, data, pt)
        out = YOLO(str(pt), task="segment").export(format=fmt, imgsz=imgsz, batch=batch,
                                                    device=reference_device(device), verbose=False, **args)
        if not out or not Path(out).exists():
            sys.exit(f"format={fmt}: the exporter wrote nothing (see its messages above)")
        place(out, dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        LOGGER.removeHandler(watcher)
    return dst, warnings


def precision_name(quantize):
    return {16: "FP16", 8: "INT8"}.get(quantize, "FP32")
