"""The README's two set-up commands. The main job's (`./scripts/setup.sh lucid && ...`) installs only
the pinned torch wheel and builds only the `lucid` target; the test suite's (`./scripts/setup.sh &&
ctest ...`) installs every pinned package, builds every target (the Python module too) and installs the
lucid_yolo package from that build into a fresh venv (build/pyvenv); .ci/run runs the README's test
command. setup.sh and build.sh run here in a copy of the repository's scripts with stand-ins for
dpkg, the venv's python and cmake that record what they were asked to do."""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, failures  # noqa: E402

SOURCE = Path(__file__).resolve().parents[2]


def stand_in(path, log):
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {log}\n')
    path.chmod(0o755)


def run_setup(root, args, log):
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("LUCID_BUILD_TARGETS", "LUCID_CMAKE_ARGS", "LUCID_EXPORT_EXTRAS", "LUCID_BUILD_DIR")}
    env.update(PATH=f"{root / 'bin'}:{os.environ['PATH']}", LUCID_JOBS="1")
    r = subprocess.run([str(root / "scripts" / "setup.sh"), *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"setup.sh {args} failed: {r.stdout}{r.stderr}")
    return log.read_text().splitlines()


def main():
    readme = (SOURCE / "README.md").read_text()
    commands = re.findall(r"^    (\./scripts/setup\.sh.*)$", readme, re.M)
    check(len(commands) == 2, f"the README has two set-up commands ({commands})")
    main_job = next((c for c in commands if "lucid train" in c), "")
    tests = next((c for c in commands if "ctest" in c), "")
    check(main_job == "./scripts/setup.sh lucid && ./build/lucid train", f"the main job's command ({main_job})")
    check(tests.startswith("./scripts/setup.sh && ctest "), f"the test suite's command ({tests})")
    ci = [line for line in (SOURCE / ".ci" / "run").read_text().splitlines() if line.strip()]
    check(ci[-1] == tests, f".ci/run runs the README's test command ({ci[-1]})")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(SOURCE / "scripts", root / "scripts")
        shutil.copy(SOURCE / "requirements.txt", root)
        shutil.copy(SOURCE / "requirements-export.txt", root)
        log = root / "log"
        (root / "bin").mkdir()
        (root / ".venv" / "bin").mkdir(parents=True)
        for tool in ("dpkg", "cmake"):
            stand_in(root / "bin" / tool, log)
        stand_in(root / ".venv" / "bin" / "python", log)
        # python -m pip wheel ... -w DIR: logged, and DIR gets a stand-in wheel.
        with open(root / ".venv" / "bin" / "python", "a") as f:
            f.write('if [ "$2 $3" = "pip wheel" ]; then while [ $# -gt 0 ]; do\n'
                    '  if [ "$1" = -w ]; then mkdir -p "$2"; : > "$2/lucid_yolo-0-py3-none-any.whl"; fi; shift\n'
                    'done; fi\n')
        # python3 -m venv DIR: logged, and DIR gets a stand-in python of its own.
        (root / "bin" / "python3").write_text(
            f'#!/bin/sh\necho "python3 $*" >> {log}\n'
            f'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp {root / ".venv" / "bin" / "python"} "$3/bin/python"; fi\n')
        (root / "bin" / "python3").chmod(0o755)
        want = hashlib.sha256((root / "requirements.txt").read_bytes()
                              + (root / "requirements-export.txt").read_bytes()).hexdigest()
        ci_extras = [line.split()[0] for line in (root / "requirements-export.txt").read_text().splitlines()
                     if re.match(r"^[a-z].*# +ci ", line)]
        torch_pin = next(line for line in (root / "requirements.txt").read_text().splitlines()
                         if line.startswith("torch=="))
        stamp = root / ".venv" / ".requirements.sha"

        calls = run_setup(root, ["lucid"], log)
        pips = [c for c in calls if c.startswith("python -m pip install -q ") and "--upgrade pip" not in c]
        check(pips == [f"python -m pip install -q {torch_pin}"], f"main job: only {torch_pin} installed ({pips})")
        check(stamp.read_text().split() == ["torch", want], "main job: the stamp says torch only")
        builds = [c for c in calls if c.startswith("cmake --build")]
        check(len(builds) == 1 and builds[0].endswith("--target lucid"), f"main job: the lucid target alone ({builds})")
        configures = [c for c in calls if c.startswith("cmake -S")]
        check(len(configures) == 1 and "LUCID_PYTHON_MODULE" not in configures[0],
              f"main job: no Python module configured ({configures})")

        calls = run_setup(root, [], log)
        pips = [c for c in calls if c.startswith("python -m pip install -q ") and "--upgrade pip" not in c]
        package_pins = [next(line for line in (root / "requirements.txt").read_text().splitlines()
                             if line.startswith(name + "==")) for name in ("torch", "numpy", "pillow", "scikit-build-core")]
        pinned = [line.split()[0] for f in ("requirements.txt", "requirements-export.txt")
                  for line in (root / f).read_text().splitlines() if re.match(r"^[a-z]", line)]
        export_pins = [next(p for p in pinned if p.startswith(name + "==")) for name in
                       ("safetensors", "onnx", "onnxruntime", "openvino", "torchvision", "coremltools", "polars")]
        check(pips == ["python -m pip install -q -r requirements.txt",
                      "python -m pip install -q -c requirements.txt " + " ".join(ci_extras),
                      "python -m pip install -q " + " ".join(package_pins),
                      f"python -m pip install -q --no-build-isolation --no-deps -C build-dir={root / 'build'} .",
                      "python -m pip install -q -c requirements.txt " + " ".join(export_pins)],
              f"test suite: every pinned package, the export packages marked ci, then the lucid_yolo package "
              f"built in build/, then the export packages into the package's venv ({pips})")
        check(len(ci_extras) >= 2, f"some export packages are marked ci ({ci_extras})")
        check(stamp.read_text().split() == [want], "test suite: the stamp says everything")
        builds = [c for c in calls if c.startswith("cmake --build")]
        check(len(builds) == 1 and "--target" not in builds[0], f"test suite: every target ({builds})")
        configures = [c for c in calls if c.startswith("cmake -S")]
        check(len(configures) == 1 and "-DLUCID_PYTHON_MODULE=ON" in configures[0],
              f"test suite: the Python module configured ({configures})")
        check(f"python3 -m venv {root / 'build' / 'pyvenv'}" in calls, "test suite: the package goes into a fresh venv")
        wheels = [c for c in calls if c.startswith("python -m pip wheel ")]
        check(wheels == [f"python -m pip wheel -q --no-build-isolation --no-deps -w {root / 'build' / 'dist'} "
                         f"-C build-dir={root / 'build'} ."], f"test suite: the package's wheel built too ({wheels})")

        calls = run_setup(root, ["lucid"], log)
        check(not [c for c in calls if "pip" in c], "main job after the full set-up: nothing to install")
    if failures:
        sys.exit(f"{len(failures)} failed")


if __name__ == "__main__":
    main()
