"""``lucid benchmark`` / ``YOLO.benchmark()``: the reference's benchmark table (format, status, size,
mask mAP50-95 on the validation split, inference ms per image, FPS) for the model as it is and each
export format whose converter is installed, made with lucid's own commands: ``lucid export`` writes
each file next to the model, ``lucid val`` validates it (batch=1, conf=0.001, plots off, as the
reference benchmarks). Status as the reference's: ✅ exported and validated, ❎ exported but not
validated (no runtime for it here), ❌ the export failed. The table is printed and appended to
benchmarks.log in the working folder, as the reference does; the rows are returned as dicts."""
import os
import subprocess
import sys
import time
from pathlib import Path

from . import _lucid

# format= name -> (the reference's display name, the converter's modules in the exporter's Python,
# devices it runs on). aoti is lucid's (a compiled package), benchmarked on CUDA only: its CPU
# compile takes minutes. TensorRT needs CUDA, as in the reference's table.
FORMATS = {
    "torchscript": ("TorchScript", ("torch",), ("cpu", "cuda")),
    "onnx": ("ONNX", ("onnx", "onnxscript"), ("cpu", "cuda")),
    "openvino": ("OpenVINO", ("openvino",), ("cpu",)),
    "engine": ("TensorRT", ("tensorrt",), ("cuda",)),
    "coreml": ("CoreML", ("coremltools",), ("cpu",)),
    "litert": ("LiteRT", ("litert_torch", "ai_edge_litert"), ("cpu",)),
    "executorch": ("ExecuTorch", ("executorch",), ("cpu",)),
    "aoti": ("AOTInductor", ("torch",), ("cuda",)),
}
DEVICE_OPTION = ("torchscript", "onnx", "engine", "aoti")  # the formats whose export takes device=
KEY = "metrics/mAP50-95(M)"
COLUMNS = ("Format", "Status❔", "Size (MB)", KEY, "Inference time (ms/im)", "FPS")


def _exporter_python():
    return os.environ.get("LUCID_PYTHON") or sys.executable


def installed(formats):
    """The formats of `formats` whose converter modules the exporter's Python has."""
    modules = sorted({m for f in formats for m in FORMATS[f][1]})
    code = ("import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))")
    r = subprocess.run([_exporter_python(), "-c", code, *modules], capture_output=True, text=True)
    found = set(r.stdout.split()) if r.returncode == 0 else set()
    return [f for f in formats if all(m in found for m in FORMATS[f][1])]


def _size_mb(path):
    p = Path(path) if path else None
    if p is None or not p.exists():
        return None
    size = p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return round(size / 2**20, 1)


def _validate(path, data, imgsz, device):
    from .model import YOLO

    kwargs = {"data": data} if data else {}
    metrics = YOLO(str(path)).val(batch=1, imgsz=imgsz, plots=False, device=device, conf=0.001, verbose=False,
                                  **kwargs)
    speed = metrics.speed["inference"]
    return round(metrics.results_dict[KEY], 4), round(speed, 2), round(1000 / (speed + 1e-9), 2)


def _row(name, status, path, result=(None, None, None)):
    return dict(zip(COLUMNS, (name, status, _size_mb(path), *result)))


def _chosen(format, device):
    kind = "cuda" if str(device) not in ("cpu", "") else "cpu"
    names = [f.strip() for f in str(format).split(",") if f.strip()] if format else list(FORMATS)
    for f in names:
        if f not in FORMATS:
            raise _lucid.LucidError(f"option format={f}: benchmark formats are {', '.join(FORMATS)}")
    skipped = [f for f in names if kind not in FORMATS[f][2]]
    ready = installed([f for f in names if f not in skipped])
    missing = [f for f in names if f not in skipped and f not in ready]
    return ready, skipped, missing


def benchmark(model, data=None, imgsz=160, device="cpu", half=False, format="", verbose=False):
    """Rows of the benchmark table (dicts keyed by COLUMNS), as the reference's benchmark() reports
    them; format= one format or a comma-separated list (default: every format)."""
    from .model import YOLO

    t0 = time.time()
    device = str(device)
    ready, skipped, missing = _chosen(format, device)
    if skipped:
        print(f"benchmark: not on device={device}: {', '.join(skipped)}")
    if missing:
        print(f"benchmark: converter not installed in {_exporter_python()}: {', '.join(missing)} (docs/deploy.md)")
    rows = []
    if not format:
        rows.append(_row("PyTorch", "✅", model, _validate(model, data, imgsz, device)))
    for f in ready:
        name, path, status = FORMATS[f][0], None, "❌"
        try:
            options = {"imgsz": imgsz}
            if f in DEVICE_OPTION:
                options["device"] = device
            if half and f not in ("litert", "executorch"):
                options["half"] = True
            path = YOLO(str(model)).export(format=f, **options)
            status = "❎"
            rows.append(_row(name, "✅", path, _validate(path, data, imgsz, device)))
        except Exception as e:  # noqa: BLE001 - each format's failure is its row, as in the reference
            if verbose:
                raise
            print(f"benchmark failure for {name}: {e}", file=sys.stderr)
            rows.append(_row(name, status, path))
    text = (f"\nBenchmarks complete for {Path(str(model)).name} on {data or 'the model file dataset'} at "
            f"imgsz={imgsz} ({time.time() - t0:.2f}s)\n"
            "Benchmarks legend:  - ✅ Success  - ❎ Export passed but validation failed  - ❌️ Export failed\n"
            f"{table(rows)}\n")
    print(text)
    with open("benchmarks.log", "a", errors="ignore", encoding="utf-8") as log:
        log.write(text)
    return rows


def table(rows):
    """The rows as an aligned text table, '-' for missing values, numbered from 1."""
    header = ("", *COLUMNS)
    cells = [[str(i), *("-" if r[c] is None else str(r[c]) for c in COLUMNS)] for i, r in enumerate(rows, 1)]
    widths = [max(len(h), *(len(c[k]) for c in cells)) if cells else len(h) for k, h in enumerate(header)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, cells)])


def benchmark_command(args):
    """`lucid benchmark model=... data=... imgsz=... device=... half=... format=... verbose=...`."""
    options = {"model": None, "data": None, "imgsz": "160", "device": "cpu", "half": "False", "format": "",
               "verbose": "False"}
    for token in args:
        key, eq, value = token.partition("=")
        if not eq or key not in options:
            print(f"lucid benchmark: error: '{token}': options are {', '.join(k + '=' for k in options)}",
                  file=sys.stderr)
            return 1
        options[key] = value
    if not options["model"]:
        print("lucid benchmark: error: option model= is required (a weights file)", file=sys.stderr)
        return 1
    flag = lambda v: str(v).lower() in ("true", "1", "yes")  # noqa: E731
    if not options["imgsz"].isdigit():
        print(f"lucid benchmark: error: option imgsz={options['imgsz']}: expected one size (exports are square)",
              file=sys.stderr)
        return 1
    try:
        benchmark(options["model"], data=options["data"], imgsz=int(options["imgsz"]), device=options["device"],
                  half=flag(options["half"]), format=options["format"], verbose=flag(options["verbose"]))
    except _lucid.LucidError as e:
        print(f"lucid benchmark: error: {e}", file=sys.stderr)
        return 1
    return 0
