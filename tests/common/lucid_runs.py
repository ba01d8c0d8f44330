"""What the Python-driven tests share: the built `lucid` binary, `lucid train` runs that stop the
test with their output when they fail, single commands and checks, small synthetic datasets, file digests, results.csv without
its time column, fit_report.json without its measurements, a checkpoint's loop state and weights
raised to confident detections."""
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
LUCID = BUILD_DIR / "lucid"

# Checks that report every failure before the test ends (the test exits non-zero if any failed).
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


LIBRARY_WORDS = ("filesystem error", "vector::", "enforce fail", "bad_alloc", "std::", "terminate called")


class Run:
    """One finished lucid command under an optional address-space cap (ulimit -v): exit code (negative:
    the signal), stdout, stderr, its error lines, peak RSS in bytes, seconds, timed out."""

    def __init__(self, args, env, cap=None, timeout=60, cwd=None):
        limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap))) if cap else None
        start = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.Popen([str(LUCID), *map(str, args)], env=env, cwd=cwd, stdout=out, stderr=err,
                                 preexec_fn=limit)
            timer = threading.Timer(timeout, p.kill)
            timer.start()
            _, status, usage = os.wait4(p.pid, 0)
            self.timed_out = not timer.is_alive()
            timer.cancel()
            out.seek(0)
            err.seek(0)
            self.stdout = out.read().decode(errors="replace")
            self.stderr = err.read().decode(errors="replace")
        self.seconds = time.monotonic() - start
        self.code = os.waitstatus_to_exitcode(status)
        self.peak = usage.ru_maxrss * 1024
        lines = self.stderr.strip().splitlines()
        self.last = lines[-1] if lines else ""
        self.errors = [line for line in lines if ": error: " in line]

    def refused(self, *fragments):
        """Exit 1 within the time, one last error line holding every fragment, no library words."""
        return (not self.timed_out and self.code == 1 and all(f in self.last for f in fragments) and
                not any(w in self.last for w in LIBRARY_WORDS))

    def __str__(self):
        return (f"exit {self.code}{' (timed out)' if self.timed_out else ''}, {self.seconds:.1f} s, "
                f"peak {self.peak >> 20} MiB: {self.last[-220:]}")


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


def confident(weights, classes=None):
    """The weights with every class logit (or those of `classes`) raised by 9: a one-epoch model
    scores nothing above the default conf=0.25, these score dozens of detections per image, with
    masks, so that tests that compare predictions compare some. Raising one class leaves no near-tie
    between classes for rounding to flip."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(weights), "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    raised = [k for k in tensors if ".cv3." in k or ".one2one_cv3." in k]
    raised = [k for k in raised if k.endswith(".2.bias")]
    if len(raised) != 6:
        sys.exit(f"{weights}: expected the 6 class-logit biases of a yolo26 segment head, found {raised}")
    for k in raised:
        if classes is None:
            tensors[k] = tensors[k] + 9
        else:
            tensors[k][classes] += 9
    out = Path(weights).with_name("confident.safetensors")
    save_file(tensors, str(out), metadata=meta)
    return out


def confident_model(tmp, env, out, classes=None):
    """A one-epoch yolo26n-seg on a small synthetic set (imgsz 64) as plain weights raised to
    confident detections (confident(), of `classes`), copied to out; returns (out, the set's validation
    images)."""
    import shutil

    data = synth_data(Path(tmp) / "synth", env, 8, 4, 128)
    lucid(["train", "model=yolo26n-seg.yaml", f"data={data}", "epochs=1", "imgsz=64", "batch=4", "device=cpu",
           f"project={tmp}", "name=run"], env)
    plain = Path(tmp) / "plain.safetensors"
    lucid(["export", f"model={Path(tmp) / 'run' / 'weights' / 'best.safetensors'}", "format=safetensors", f"out={plain}"], env)
    shutil.copy(confident(plain, classes), out)
    return Path(out), sorted((data.parent / "images" / "val").glob("*.jpg"))
