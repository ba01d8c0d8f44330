"""`lucid benchmark` (the package's console mode, python -m lucid_yolo benchmark), as the reference's
benchmark table: on one-epoch weights (imgsz 64, CPU) with format=onnx,torchscript, each format is
exported by lucid export and validated by lucid val (onnxruntime for ONNX): both rows ✅ with a size,
a mask mAP50-95 within 0.01 of the weights' own lucid val (batch=1, conf=0.001) and an inference time;
the table is printed and appended to benchmarks.log in the working folder; an unknown format is
refused in one line."""
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, failures, lucid  # noqa: E402
from package_env import PACKAGE_PYTHON, package_workdir  # noqa: E402


def main():
    with package_workdir() as (tmp, env, work):
        lucid(["train", "epochs=1", "imgsz=64", "batch=4", "workers=2", "device=cpu", "plots=False",
               f"project={tmp / 'runs'}", "name=t"], env)
        weights = tmp / "runs" / "t" / "weights" / "best.safetensors"
        r = lucid(["val", f"model={weights}", "imgsz=64", "batch=1", "conf=0.001", "device=cpu", "plots=False",
                   f"project={tmp / 'runs'}", "name=v"], env)
        own = float(re.search(r"^\s+all\s+\d+\s+\d+(?:\s+[\d.]+){7}\s+([\d.]+)", r.stdout, re.M).group(1))
        r = subprocess.run([str(PACKAGE_PYTHON), "-m", "lucid_yolo", "benchmark", f"model={weights}", "imgsz=64",
                            "format=onnx,torchscript", "device=cpu"], cwd=work, env=env, capture_output=True,
                           text=True)
        print(r.stdout[-3000:])
        check(r.returncode == 0, f"lucid benchmark exit {r.returncode}: {r.stderr[-1500:]}")
        rows = {m[0]: m[1:] for m in re.findall(r"^\d+\s+(ONNX|TorchScript)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$",
                                                 r.stdout, re.M)}
        for name in ("ONNX", "TorchScript"):
            row = rows.get(name)
            ok = row is not None and row[0] == "✅" and float(row[1]) > 0 and abs(float(row[2]) - own) <= 0.01 \
                and float(row[3]) > 0
            check(ok, f"{name}: ✅, size, mask mAP50-95 {row[2] if row else None} vs the weights' {own}, time: {row}")
        log = work / "benchmarks.log"
        check(log.is_file() and "Benchmarks complete" in log.read_text() and "ONNX" in log.read_text(),
              "the table is appended to benchmarks.log in the working folder")
        r = subprocess.run([str(PACKAGE_PYTHON), "-m", "lucid_yolo", "benchmark", f"model={weights}", "format=nope"],
                           cwd=work, env=env, capture_output=True, text=True)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check(r.returncode == 1 and "format=nope" in last and "onnx" in last, f"format=nope refused: {last}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
