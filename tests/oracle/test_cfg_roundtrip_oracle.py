#!/usr/bin/env python3
"""Run records both ways between lucid and the reference (tiny dataset, 1 epoch, CPU):

- an Ultralytics run's args.yaml trains in lucid (`lucid train cfg=.../args.yaml`): the reference's
  keys lucid train does not use are named once on one line, and the options both have come out in
  lucid's args.yaml as the reference recorded them;
- lucid's args.yaml trains in the reference (`yolo train cfg=.../args.yaml`, its entrypoint refuses
  any key it does not know): it holds only the reference's keys, None as null, and the reference's
  run records the same values for them; lucid's own keys are in lucid_args.yaml beside it, which
  `lucid train cfg=RUN/args.yaml` reads too, so the run's options come back whole.
"""
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR  # noqa: E402

os.environ.setdefault("YOLO_OFFLINE", "1")
warnings.filterwarnings("ignore")

LUCID = BUILD_DIR / "lucid"
FAILURES = []
# Options lucid and the reference both record, compared after each round trip.
SHARED = ["data", "epochs", "imgsz", "batch", "lr0", "lrf", "momentum", "weight_decay", "mosaic", "close_mosaic",
          "seed", "fraction", "mask_ratio", "overlap_mask", "single_cls", "rect", "cos_lr", "optimizer", "patience"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def make_dataset(root):
    from PIL import Image

    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for i in range(4 if split == "train" else 2):
            rgb = np.random.default_rng(i).integers(0, 255, (64, 64, 3), dtype=np.uint8)
            Image.fromarray(rgb).save(root / "images" / split / f"{i}.jpg")
            (root / "labels" / split / f"{i}.txt").write_text(f"{i % 2} 0.3 0.3 0.7 0.3 0.7 0.7 0.3 0.7\n")
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames: ['a', 'b']\n")
    return root / "data.yaml"


def yolo(args, cwd):
    """The reference's command line (`yolo ...`), in a fresh process."""
    code = "import sys; from ultralytics.cfg import entrypoint; sys.argv = ['yolo', *sys.argv[1:]]; entrypoint()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def lucid(args, cwd, env):
    return subprocess.run([str(LUCID), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)


def load(path):
    return yaml.safe_load(Path(path).read_text())


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "LUCID_CACHE_DIR": str(tmp / "cache")}
        data = make_dataset(tmp / "data")

        # The reference's run, then lucid from its args.yaml.
        r = yolo(["segment", "train", "model=yolo26n-seg.yaml", f"data={data}", "epochs=1", "imgsz=64", "batch=4",
                  "workers=0", "device=cpu", "plots=False", "amp=False", f"project={tmp / 'ref'}", "name=r"], tmp)
        if r.returncode != 0:
            sys.exit(f"the reference's training failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        ref_args = load(tmp / "ref" / "r" / "args.yaml")
        r = lucid(["train", f"cfg={tmp / 'ref' / 'r' / 'args.yaml'}", "workers=0", f"project={tmp / 'lucid'}", "name=a"],
                  tmp, env)
        check(r.returncode == 0, f"lucid train cfg=<the reference's args.yaml> trains (exit {r.returncode})"
              + ("" if r.returncode == 0 else f"\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"))
        if r.returncode != 0:
            sys.exit("\n".join(FAILURES))
        ignored = [line for line in r.stdout.splitlines() if "the reference's keys this command does not use" in line]
        check(len(ignored) == 1 and "task" in ignored[0] and "mode" in ignored[0] and "save_dir" in ignored[0],
              f"the ignored keys are named once, on one line: {ignored}")
        ours = load(tmp / "lucid" / "a" / "args.yaml")
        differ = {k: (ours.get(k), ref_args.get(k)) for k in SHARED if not same(ours.get(k), ref_args.get(k))}
        check(not differ, f"lucid's run records the reference's values ({len(SHARED)} options; differ: {differ})")

        # lucid's args.yaml: only the reference's keys, None as null, loadable by the reference's cfg=.
        text = (tmp / "lucid" / "a" / "args.yaml").read_text()
        check("None" not in text and ": null" in text, "lucid's args.yaml writes None as null")
        own = load(tmp / "lucid" / "a" / "lucid_args.yaml")
        check("capture_step" in own and "capture_step" not in ours, "lucid's own keys are in lucid_args.yaml")
        r = yolo(["train", f"cfg={tmp / 'lucid' / 'a' / 'args.yaml'}", "workers=0", "plots=False", "amp=False",
                  f"project={tmp / 'ref'}", "name=from_lucid"], tmp)
        check(r.returncode == 0, f"yolo train cfg=<lucid's args.yaml> trains (exit {r.returncode})"
              + ("" if r.returncode == 0 else f"\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"))
        back = tmp / "ref" / "from_lucid"
        if r.returncode == 0:
            rows = (back / "results.csv").read_text().splitlines()
            check(len(rows) == 2, f"the reference trained lucid's 1 epoch ({len(rows) - 1} rows)")
            theirs = load(back / "args.yaml")
            differ = {k: (ours.get(k), theirs.get(k)) for k in SHARED if not same(ours.get(k), theirs.get(k))}
            check(not differ, f"the reference's run records lucid's values (differ: {differ})")

        # lucid from its own run's args.yaml: lucid_args.yaml beside it comes along.
        r = lucid(["train", f"cfg={tmp / 'lucid' / 'a' / 'args.yaml'}", f"project={tmp / 'lucid'}",
                   "name=again"], tmp, env)
        check(r.returncode == 0 and "lucid_args.yaml beside it" in r.stdout,
              f"lucid train cfg=<lucid's args.yaml> reads lucid_args.yaml beside it (exit {r.returncode})")
        if r.returncode == 0:
            again = load(tmp / "lucid" / "again" / "args.yaml")
            differ = {k: (ours[k], again.get(k)) for k in ours if k not in ("name", "cfg") and ours[k] != again.get(k)}
            check(not differ, f"the same options again (differ: {differ})")
            own_again = load(tmp / "lucid" / "again" / "lucid_args.yaml")
            differ = {k: (own.get(k), own_again.get(k)) for k in set(own) | set(own_again) if own.get(k) != own_again.get(k)}
            check(not differ, f"the same lucid_args.yaml again (differ: {differ})")
    if FAILURES:
        sys.exit(f"{len(FAILURES)} checks failed")


if __name__ == "__main__":
    main()
