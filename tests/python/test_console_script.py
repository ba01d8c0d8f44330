"""The `lucid` console script the package installs (lucid_yolo/__main__.py) runs the whole command line
in the package's own interpreter: `lucid version`, a one-epoch `lucid train` whose checkpoint equals
the `lucid` executable's byte for byte, `lucid export format=onnx` with no LUCID_PYTHON, and the
executable's exit codes for an unknown command (2) and a bad option (1, one line naming it)."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import LUCID, check, digest, failures, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402


def main():
    require_package()
    script = PACKAGE_PYTHON.parent / "lucid"
    check(script.is_file(), f"pip installed the console script {script}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        env.pop("LUCID_PYTHON", None)

        def run(cmd, *args):
            return subprocess.run([str(cmd), *map(str, args)], env=env, capture_output=True, text=True, cwd=tmp)

        r = run(script, "version")
        check(r.returncode == 0 and r.stdout.strip() == run(LUCID, "version").stdout.strip(),
              f"lucid version: {r.stdout.strip()!r}, as the executable's")
        data = synth_data(tmp / "synth", env, 8, 4, 64)
        fit = ["train", f"data={data}", "epochs=1", "imgsz=64", "batch=4", "device=cpu", f"project={tmp}"]
        r1, r2 = run(script, *fit, "name=script"), run(LUCID, *fit, "name=binary")
        a, b = tmp / "script" / "weights" / "last.safetensors", tmp / "binary" / "weights" / "last.safetensors"
        check(r1.returncode == 0 and a.is_file() and b.is_file() and digest(a) == digest(b),
              "lucid train through the console script writes the executable's checkpoint, byte for byte")
        r = run(script, "export", f"model={a}", "format=onnx", "imgsz=64", f"out={tmp / 'm.onnx'}")
        check(r.returncode == 0 and (tmp / "m.onnx").stat().st_size > 0, "lucid export format=onnx from the console script")
        r = run(script, "detect", "train")
        check(r.returncode == 2 and "unknown command 'detect'" in r.stderr, f"an unknown command exits 2 ({r.returncode})")
        r = run(script, "train", "epochs=zero")
        check(r.returncode == 1 and "epochs=zero" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"a bad option exits 1 with one line naming it: {r.stderr.strip()!r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
