"""The Python that has the lucid_yolo package installed (build/pyvenv, a fresh venv with the pinned
torch into which the test set-up, scripts/setup.sh, pip-installs the package; LUCID_PACKAGE_PYTHON
for another), for the tests that drive the package."""
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", SOURCE_DIR / "build"))
PACKAGE_PYTHON = Path(os.environ.get("LUCID_PACKAGE_PYTHON", BUILD_DIR / "pyvenv" / "bin" / "python"))


def require_package():
    """Stops the test (failing it) when the package's Python is missing or cannot import lucid_yolo."""
    if not PACKAGE_PYTHON.exists():
        sys.exit(f"{PACKAGE_PYTHON} does not exist: run scripts/python_package.sh first (or set LUCID_PACKAGE_PYTHON)")
    r = subprocess.run([str(PACKAGE_PYTHON), "-c", "import lucid_yolo; print(lucid_yolo.__file__)"],
                       capture_output=True, text=True, cwd="/")
    if r.returncode != 0:
        sys.exit(f"{PACKAGE_PYTHON} cannot import lucid_yolo:\n{r.stderr[-2000:]}")
    print(f"package: {r.stdout.strip()} ({PACKAGE_PYTHON})")


def package_env(tmp):
    """The environment of a package run: the package finds its own model YAMLs and scripts, runs
    use their own cache, and exports run with this test's Python (the project venv, which has the
    export packages that the package's venv lacks), as a user whose export packages live in another
    Python sets LUCID_PYTHON."""
    env = {k: v for k, v in os.environ.items() if k not in ("LUCID_MODELS_DIR", "LUCID_SCRIPTS_DIR")}
    env["LUCID_CACHE_DIR"] = str(Path(tmp) / "cache")
    env.setdefault("LUCID_PYTHON", sys.executable)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_package_script(script, cwd, env):
    """Runs tests/python/<script> with the package's Python in cwd (it imports lucid_runs from
    LUCID_TEST_COMMON); prints its output and stops the test when it fails."""
    env = dict(env, LUCID_TEST_COMMON=str(SOURCE_DIR / "tests" / "common"))
    r = subprocess.run([str(PACKAGE_PYTHON), str(SOURCE_DIR / "tests" / "python" / script)], cwd=cwd, env=env,
                       capture_output=True, text=True)
    print(r.stdout[-6000:])
    if r.returncode != 0:
        sys.exit(f"{script} failed ({r.returncode}):\n{r.stderr[-4000:]}")


@contextmanager
def package_workdir():
    """After require_package(): a temporary folder, the package run's environment for it and a
    work/ folder inside it, as (tmp, env, work)."""
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "work").mkdir()
        yield tmp, package_env(tmp), tmp / "work"
