"""Run by test_export_formats.py with the installed lucid_yolo, in a folder holding model.safetensors
and with LUCID_PYTHON naming a Python that has the export packages: YOLO.export(format=f) writes each
format where `lucid export` puts it by default and returns that path, nothing else beside it;
imgsz=[h, w] is taken with h == w and refused otherwise; without LUCID_PYTHON the exporter runs with
the package's own Python."""
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.environ["LUCID_TEST_COMMON"])
from lucid_runs import check, failures  # noqa: E402

from lucid_yolo import YOLO, LucidError, _lucid  # noqa: E402

# The formats whose packages requirements.txt pins (safetensors needs none), with the suffix of the
# command's default output (docs/deploy.md).
SUFFIXES = {"safetensors": "-weights.safetensors", "pt": ".pt", "onnx": ".onnx", "torchscript": ".torchscript"}
ONNX_IMGSZ = 96  # not the weights' 64: the ONNX input shows that imgsz=[96, 96] reached the command


def export_alone(fmt, **kwargs):
    """Exports a copy of the weights in a folder of its own: the returned path and the folder's files."""
    folder = Path(fmt)
    folder.mkdir()
    shutil.copy("model.safetensors", folder / "model.safetensors")
    path = YOLO(str(folder / "model.safetensors")).export(format=fmt, **kwargs)
    return path, sorted(p.name for p in folder.iterdir())


def error_of(call):
    try:
        call()
    except LucidError as e:
        return str(e)
    return ""


def exporter_python(scripts):
    """The Python that export() runs the exporter with, as a stand-in deploy_export.py records it."""
    record = Path("which-python.txt")
    record.unlink(missing_ok=True)
    saved = os.environ.get("LUCID_SCRIPTS_DIR")  # the package's scripts, set at its import
    os.environ["LUCID_SCRIPTS_DIR"] = str(scripts)
    try:
        YOLO("model.safetensors").export(format="torchscript", out=str(record))
    finally:
        os.environ.pop("LUCID_SCRIPTS_DIR")
        if saved is not None:
            os.environ["LUCID_SCRIPTS_DIR"] = saved
    return record.read_text()


def check_exporter_python():
    scripts = Path("stand-in-scripts").resolve()
    scripts.mkdir()
    # deploy_export.py FORMAT WEIGHTS OUT ...: writes its interpreter to OUT
    (scripts / "deploy_export.py").write_text("import sys\nopen(sys.argv[3], 'w').write(sys.executable)\n")
    given = os.environ.pop("LUCID_PYTHON")
    used = exporter_python(scripts)
    check(used == sys.executable, f"without LUCID_PYTHON the exporter runs with the package's Python: {used}")
    check("LUCID_PYTHON" not in os.environ, "export() leaves LUCID_PYTHON unset after the call")
    os.environ["LUCID_PYTHON"] = given
    used = exporter_python(scripts)
    check(used == given, f"with LUCID_PYTHON set the exporter runs with it: {used}")


def main():
    table = _lucid.export_formats()
    for fmt, suffix in SUFFIXES.items():
        check(table.get(fmt) == suffix, f"_lucid.export_formats()[{fmt!r}] is {suffix!r}")
    check(table.get("litert") == table.get("tflite") == ".tflite", "litert and its alias tflite both write .tflite")
    for fmt, suffix in SUFFIXES.items():
        kwargs = {"imgsz": [ONNX_IMGSZ, ONNX_IMGSZ]} if fmt == "onnx" else {}
        path, files = export_alone(fmt, **kwargs)
        written = str(Path(fmt) / f"model{suffix}")
        check(path == written and Path(path).is_file(), f"export(format={fmt!r}) returns {path}, written there")
        check(files == sorted(["model.safetensors", f"model{suffix}"]), f"format={fmt}: the folder holds {files}")
    message = error_of(lambda: YOLO("model.safetensors").export(format="onnx", imgsz=[64, 96]))
    check("option imgsz=[64, 96]" in message and not Path("model.onnx").exists(),
          f"imgsz=[64, 96] is refused, naming the option: {message}")
    check_exporter_python()
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
