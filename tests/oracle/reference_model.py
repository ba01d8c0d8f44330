"""A small model trained by the reference package on lucid's synthetic set (`lucid data synth`), shared
by the tests that need reference-trained weights: it is trained once per build and settings, kept
under BUILD_DIR/oracle-cache/reference-<key>/ (key: a digest of the settings and the package
version), and a lock file lets concurrent tests wait for one training instead of running two."""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, run  # noqa: E402

CACHE = BUILD_DIR / "oracle-cache"
LUCID = BUILD_DIR / "lucid"
# Enough epochs for masks well above a fresh start's near-zero mAP, few enough for CI (a few minutes).
SETTINGS = dict(model="yolo26n-seg.yaml", epochs=15, imgsz=160, batch=8, nbs=8, seed=0, warmup_epochs=1, close_mosaic=3)


def synthetic_dataset():
    """data.yaml of lucid's synthetic set (Ultralytics form), written once into the cache."""
    out = CACHE / "synth"
    with _locked("synth"):
        if not (out / "data.yaml").exists():
            tmp = CACHE / "synth.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            run([LUCID, "data", "synth", f"out={tmp}"])
            tmp.rename(out)
    return out / "data.yaml"


def reference_weights(**overrides):
    """best.pt of the reference's training with SETTINGS (and overrides) on the synthetic set."""
    import ultralytics

    settings = {**SETTINGS, **overrides}
    key = hashlib.sha256(json.dumps([settings, ultralytics.__version__], sort_keys=True).encode()).hexdigest()[:12]
    out = CACHE / f"reference-{key}"
    data = synthetic_dataset()
    with _locked(out.name):
        if not (out / "best.pt").exists():
            tmp = CACHE / f"{out.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            code = (
                "import sys, json\n"
                "from ultralytics import YOLO\n"
                "s = json.loads(sys.argv[1])\n"
                "YOLO(s.pop('model')).train(data=sys.argv[2], project=sys.argv[3], name='train', device='cpu',\n"
                "    workers=0, plots=False, deterministic=True, amp=False, verbose=False, **s)\n"
            )
            print(f"training the reference model {settings} (cached in {out})", flush=True)
            r = subprocess.run([sys.executable, "-c", code, json.dumps(settings), str(data), str(tmp)],
                               capture_output=True, text=True, env=dict(os.environ, YOLO_OFFLINE="1"))
            if r.returncode != 0:
                sys.exit(f"reference training failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            (tmp / "train" / "weights" / "best.pt").rename(tmp / "best.pt")
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
    return out / "best.pt"


class _locked:
    def __init__(self, name):
        CACHE.mkdir(parents=True, exist_ok=True)
        self.path = CACHE / f"{name}.lock"

    def __enter__(self):
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
