"""The Python package's export() names its output from the command's own format table: run with the
installed package (export_formats.py) on one-epoch weights, every format whose packages
requirements.txt pins (safetensors, pt, onnx, torchscript) is written where `lucid export` writes it
and that path returned; the table the module exposes (_lucid.export_formats()) holds every format
`lucid export --help` lists, and the alias tflite is the format litert."""
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import Run, check, failures, lucid, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402


def package_table(env):
    """_lucid.export_formats() of the installed package: format= value -> output suffix."""
    code = "import json, lucid_yolo; print(json.dumps(lucid_yolo._lucid.export_formats()))"
    r = subprocess.run([str(PACKAGE_PYTHON), "-c", code], env=env, capture_output=True, text=True, cwd="/")
    if r.returncode != 0:
        sys.exit(f"_lucid.export_formats() failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def check_table(env, weights):
    table = package_table(env)
    lines = lucid(["export", "--help"], env).stdout.splitlines()
    help_text = next(line for line in lines if line.strip().startswith("format ")).split("]", 1)[1]
    # "safetensors, pt, ..., litert (LiteRT, .tflite; also format=tflite), ..., coreml or engine (TensorRT); docs/..."
    names = re.sub(r"\([^)]*\)", "", help_text).split(";")[0]
    listed = [n.strip() for n in re.split(r",| or ", names) if n.strip()]
    check(len(listed) >= 10 and set(listed) <= set(table),
          f"_lucid.export_formats() holds every format of --help: {listed}")
    unnamed = [name for name in table if not re.search(rf"\b{name}\b", help_text)]
    check(not unnamed, f"--help names every format= value of the table, aliases too (missing: {unnamed})")
    r = Run(["export", f"model={weights}", "format=tflite", "dynamic=True"], env)
    check(r.refused("option dynamic=", "not format=litert"), f"format=tflite is format=litert: {r}")


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        data = synth_data(tmp / "synth", env, 8, 4, 128)
        lucid(["train", "model=yolo26n-seg.yaml", f"data={data}", "epochs=1", "imgsz=64", "batch=4", "device=cpu",
               f"project={tmp}", "name=run"], env)
        work = tmp / "work"
        work.mkdir()
        shutil.copy(tmp / "run" / "weights" / "best.safetensors", work / "model.safetensors")
        check_table(env, work / "model.safetensors")
        env["LUCID_TEST_COMMON"] = str(Path(__file__).resolve().parents[1] / "common")
        r = subprocess.run([str(PACKAGE_PYTHON), str(Path(__file__).parent / "export_formats.py")], cwd=work, env=env,
                           capture_output=True, text=True)
        print(r.stdout[-6000:])
        if r.returncode != 0:
            sys.exit(f"export_formats.py failed ({r.returncode}):\n{r.stderr[-4000:]}")
        import onnx

        graph = onnx.load(str(work / "onnx" / "model.onnx")).graph
        dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
        check(dims == [1, 3, 96, 96], f"export(format='onnx', imgsz=[96, 96]): input {dims}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
