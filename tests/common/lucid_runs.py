"""What the Python-driven tests share: the built `lucid` binary, `lucid train` runs that stop the
test with their output when they fail, file digests and results.csv without its time column."""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
LUCID = BUILD_DIR / "lucid"


def digest(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def train(args, env, project, name, extra=()):
    r = subprocess.run([LUCID, "train", *args, f"project={project}", f"name={name}", *extra], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lucid train failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def results_without_time(run):
    rows = (Path(run) / "results.csv").read_text().splitlines()
    return [",".join(c for i, c in enumerate(r.split(",")) if i != 1) for r in rows]
