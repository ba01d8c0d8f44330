"""The built wheel installed as a user installs it: a fresh venv in a temporary folder outside the
source tree, `pip install` of build/dist/lucid_yolo-*.whl (scripts/python_package.sh --wheel, which
the test set-up runs) with its dependencies, torch==2.11.0 and numpy, resolved by pip; then, from a
temporary folder and with an environment that names neither the source tree nor the build,
`python -c "from lucid_yolo import YOLO"`, `lucid version` and a one-epoch `lucid train` on CPU,
all from that venv. A missing wheel fails the test."""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, failures  # noqa: E402
from package_env import BUILD_DIR, SOURCE_DIR  # noqa: E402

ROOTS = (str(SOURCE_DIR.resolve()), str(BUILD_DIR.resolve()))


def find_wheel():
    pattern = BUILD_DIR / "dist" / "lucid_yolo-*.whl"
    wheels = sorted(pattern.parent.glob(pattern.name), key=lambda p: p.stat().st_mtime)
    if not wheels:
        sys.exit(f"no wheel {pattern}: `scripts/python_package.sh --wheel` builds it (scripts/setup.sh runs it)")
    wheel = wheels[-1]
    print(f"wheel: {wheel}: {wheel.stat().st_size >> 10} KiB", flush=True)
    return wheel


def timed(what, args, **kw):
    start = time.monotonic()
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    print(f"{what}: exit {r.returncode}, {time.monotonic() - start:.0f} s", flush=True)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n")
    return r


def install(wheel, tmp):
    """A fresh venv in tmp with the wheel pip-installed; returns the venv. The project venv's package
    versions are pip's constraints, so that pip resolves the wheel's dependencies to the files the
    project set-up fetched (from pip's cache) and not to newer releases on the index."""
    venv = tmp / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if timed("python3 -m venv", ["python3", "-m", "venv", venv], env=env, cwd=tmp).returncode != 0:
        sys.exit("python3 -m venv failed")
    pins = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True,
                          text=True, check=True).stdout
    constraints, report = tmp / "constraints.txt", tmp / "report.json"
    constraints.write_text(pins)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", constraints]
    # The project's pip, as scripts/python_package.sh upgrades it: its cache layout is the one that
    # holds the project's torch (pip before 23.3 reads another).
    if timed("pip install --upgrade pip", [*pip, "--upgrade", "pip"], env=env, cwd=tmp).returncode != 0:
        sys.exit("upgrading the venv's pip failed")
    r = timed(f"pip install {wheel.name}", [*pip, "--report", report, wheel], env=env, cwd=tmp)
    if r.returncode != 0:
        sys.exit("pip install of the wheel failed")
    held = dict(line.lower().replace("_", "-").split("==") for line in pins.splitlines() if "==" in line)
    got = {p["metadata"]["name"].lower().replace("_", "-"): p["metadata"]["version"]
           for p in json.loads(report.read_text())["install"]}
    new = {n: v for n, v in got.items() if n != "lucid-yolo" and held.get(n) != v}
    check(got.get("torch") == "2.11.0" and "numpy" in got and not new,
          f"pip installed lucid_yolo with torch {got.get('torch')} and numpy {got.get('numpy')}, "
          f"{len(got) - 1} dependencies, all as the project venv holds them (others: {new})")
    return venv


def user_env(venv, tmp):
    """The environment of an activated venv: no LUCID_* variable (LUCID_MODELS_DIR, LUCID_SCRIPTS_DIR,
    LUCID_PYTHON, ...), no PYTHONPATH, nothing that names the source tree or the build."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUCID_") and
           k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not any(root in v for root in ROOTS)}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not p.startswith(ROOTS)]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    env["LUCID_CACHE_DIR"] = str(tmp / "cache")
    return env


def use(venv, tmp):
    """The import, `lucid version` and a one-epoch `lucid train` from the venv, cwd a folder of tmp."""
    env, cwd = user_env(venv, tmp), tmp / "work"
    cwd.mkdir()
    py, lucid = venv / "bin" / "python", venv / "bin" / "lucid"
    runs = [timed("from lucid_yolo import YOLO", [py, "-c", "from lucid_yolo import YOLO"], env=env, cwd=cwd)]
    check(runs[-1].returncode == 0, 'python -c "from lucid_yolo import YOLO"')
    where = "import lucid_yolo, lucid_yolo._lucid as m, torch; print(lucid_yolo.__file__, m.__file__, torch.__file__)"
    runs.append(timed("where the modules are", [py, "-c", where], env=env, cwd=cwd))
    files = runs[-1].stdout.split()
    check(len(files) == 3 and all(Path(f).resolve().is_relative_to(venv.resolve()) for f in files),
          f"lucid_yolo, its extension module and torch load from the fresh venv: {files}")
    if not lucid.is_file():
        sys.exit(f"the wheel installed no {lucid}: a wheel older than the package's console script? "
                 "`scripts/python_package.sh --wheel` builds it again")
    runs.append(timed("lucid version", [lucid, "version"], env=env, cwd=cwd))
    check(runs[-1].returncode == 0 and runs[-1].stdout.strip() != "", f"lucid version: {runs[-1].stdout.strip()!r}")
    runs.append(timed("lucid data synth", [lucid, "data", "synth", "out=synth", "n_train=8", "n_val=4", "imgsz=64"],
                      env=env, cwd=cwd))
    fit = ["train", "data=synth/data.yaml", "epochs=1", "imgsz=64", "batch=4", "device=cpu", "project=runs", "name=fit"]
    runs.append(timed("lucid train", [lucid, *fit], env=env, cwd=cwd))
    weights = cwd / "runs" / "fit" / "weights" / "last.safetensors"
    check(runs[-1].returncode == 0 and weights.is_file() and weights.stat().st_size > 0,
          f"lucid train exits {runs[-1].returncode} and writes {weights.relative_to(tmp)}")
    named = [root for r in runs for root in ROOTS if root in r.stdout + r.stderr]
    check(not named, f"no run's output names the source tree or the build ({sorted(set(named))})")


def main():
    wheel = find_wheel()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lucid-wheel-") as tmp:
        tmp = Path(tmp).resolve()
        if any(tmp.is_relative_to(root) for root in ROOTS):
            sys.exit(f"the temporary folder {tmp} is inside the source tree or the build: set TMPDIR elsewhere")
        use(install(wheel, tmp), tmp)
    print(f"total: {time.monotonic() - start:.0f} s")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
