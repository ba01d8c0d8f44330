"""What the Python-driven tests share: the built `lucid` binary, `lucid train` runs that stop the
test with their output when they fail, single commands and checks, small synthetic datasets, file digests, results.csv without
its time column, fit_report.json without its measurements and a checkpoint's loop state."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
LUCID = BUILD_DIR / "lucid"

# Checks that report every failure before the test ends (the test exits non-zero if any failed).
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def lucid(args, env, expect=0, cwd=None):
    """One `lucid` command (in cwd); a return code other than expect (None: any) stops the test with its output."""
    r = subprocess.run([str(LUCID), *map(str, args)], env=env, capture_output=True, text=True, cwd=cwd)
    if expect is not None and r.returncode != expect:
        sys.exit(f"lucid {' '.join(map(str, args))} returned {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def digest(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


# fit_report.json fields about the process that ran the steps (time, memory, the replay routing of
# its steps; a resumed run's cover the steps after resume) rather than what the fit computed.
MEASURED = ["fit_seconds", "peak_allocated_mib", "peak_reserved_mib", "stage_times", "loader_wait", "step_time", "replay"]


def train(args, env, project, name, extra=(), cwd=None):
    r = subprocess.run([LUCID, "train", *args, f"project={project}", f"name={name}", *extra], env=env,
                       capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit(f"lucid train failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def results_without_time(run):
    rows = (Path(run) / "results.csv").read_text().splitlines()
    return [",".join(c for i, c in enumerate(r.split(",")) if i != 1) for r in rows]


def synth_data(out, env, n_train, n_val, imgsz):
    """`lucid data synth` into out; returns the dataset YAML."""
    r = subprocess.run([LUCID, "data", "synth", f"out={out}", f"n_train={n_train}", f"n_val={n_val}",
                        f"imgsz={imgsz}"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lucid data synth failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return Path(out) / "data.yaml"


def fit_report_without_measurements(run):
    report = json.loads((Path(run) / "fit_report.json").read_text())
    return {k: v for k, v in report.items() if k not in MEASURED}


def checkpoint_state(path):
    """The loop state (the 'lucid' metadata) of a checkpoint, read from its safetensors header."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(json.loads(raw[8:8 + n])["__metadata__"]["lucid"])
