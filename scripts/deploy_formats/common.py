"""What every deployment format shares: the optional packages a format needs (named in the error when
absent), the device check, the folder placement, lucid's own PyTorch network (lucid_yolo/nn) for the
formats traced from a Python module and the reference's metadata. No format imports the reference
package (only format=pt's writer, ultralytics_weights.py, does)."""
import datetime
import importlib.util
import os
import shutil
import sys
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


def network_package():
    """lucid_yolo.nn, loaded from its folder without the package's native module: the installed
    package's nn/ beside these scripts (lucid_yolo/scripts), or the source tree's python/lucid_yolo/nn."""
    if "lucid_network" in sys.modules:
        return sys.modules["lucid_network"]
    scripts = Path(__file__).resolve().parents[1]
    for folder in (scripts.parent / "nn", scripts.parent / "python" / "lucid_yolo" / "nn"):
        if (folder / "__init__.py").is_file():
            spec = importlib.util.spec_from_file_location("lucid_network", folder / "__init__.py",
                                                          submodule_search_locations=[str(folder)])
            module = importlib.util.module_from_spec(spec)
            sys.modules["lucid_network"] = module
            spec.loader.exec_module(module)
            return module
    sys.exit(f"lucid export: the network definition (lucid_yolo/nn) is missing beside {scripts}")


def deployed_network(src, nms=False, layout=None, **options):
    """(DeployedNetwork of lucid weights, class names): FP32 on the CPU, BatchNorms folded, in
    `layout`, else nms='s (True: NMS inside; False: an end-to-end model's one-to-one top-k, every
    other model's dense output)."""
    require("lucid export", ("torch", "torch"), ("safetensors", "safetensors"))
    nn = network_package()
    net, names, _ = nn.load_network(src)
    layout = layout or nn.default_layout(net, nms)
    if layout == "nms":  # imported before any trace: its import runs operators a trace would record
        require("nms=True (torchvision's NMS inside the file)", ("torchvision", "torchvision"))
        import torchvision  # noqa: F401
    return nn.DeployedNetwork(net, layout, **options), names


def metadata(deployed, names, imgsz, batch, args):
    """The metadata the reference's exporter writes with a model (and lucid's ONNX writer): names,
    stride, imgsz, batch, task, the export's arguments, end2end (the one-to-one top-k rows)."""
    net = deployed.network
    return {"description": f"lucid-yolo {Path(str(net.cfg.get('yaml_file', 'yolo-seg'))).stem} model",
            "author": "lucid-yolo",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "version": lucid_version(),
            "license": "Apache-2.0",
            "stride": int(net.stride),
            "task": "segment",
            "head": type(net.head.proto).__name__.replace("Proto26", "Segment26").replace("Proto", "Segment"),
            "batch": batch,
            "imgsz": [imgsz, imgsz],
            "names": {i: n for i, n in enumerate(names)},
            "args": dict(args),
            "channels": 3,
            "end2end": deployed.layout == "one_to_one"}


def lucid_version():
    """The package's version: the installed lucid_yolo's, else the source tree's pyproject.toml."""
    from importlib import metadata as package_metadata

    try:
        return package_metadata.version("lucid_yolo")
    except package_metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        for line in pyproject.read_text().splitlines() if pyproject.is_file() else []:
            if line.startswith("version = "):
                return line.split("=", 1)[1].strip().strip('"')
    return "unknown"


def onnx_metadata(onnx_file):
    """The metadata lucid's ONNX file carries (the reference's), Python literals read as values."""
    import ast

    import onnx

    meta = {}
    for p in onnx.load(onnx_file, load_external_data=False).metadata_props:
        try:
            meta[p.key] = ast.literal_eval(p.value)
        except (ValueError, SyntaxError):
            meta[p.key] = p.value
    return meta


def example_input(batch, imgsz, device="cpu", dtype=None):
    import torch

    return torch.zeros(batch, 3, imgsz, imgsz, device=device, dtype=dtype or torch.float32)


def check_device(device, fmt):
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"format={fmt} device={device}: no usable CUDA device for this Python's torch")


def place(produced, dst, marker="metadata.yaml"):
    """Moves an exported file or folder to dst. A folder replaces only an earlier export's folder
    (one holding `marker`), never another folder."""
    produced, dst = Path(produced), Path(dst)
    if dst.is_dir():
        if not (dst / marker).is_file():
            sys.exit(f"out={dst}: an existing folder that is not an earlier export (no {marker}); give another out=")
        shutil.rmtree(dst)
    elif produced.is_dir() and dst.exists():
        dst.unlink()
    os.replace(produced, dst)


def precision_name(quantize):
    return {16: "FP16", 8: "INT8"}.get(quantize, "FP32")
