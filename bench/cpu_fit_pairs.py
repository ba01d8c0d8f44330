#!/usr/bin/env python3
"""CPU training at the defaults, lucid beside the reference: pairs of fresh-process fits of the same
settings (yolo26n-seg from scratch on coco128-seg, 160 px, batch 8, the default deterministic=True,
validation every epoch, plots off), alternating which arm runs first.

  cpu_fit_pairs.py --lucid build/lucid --out DIR [--pairs 3] [--epochs 3] [--workers 2]
                   [--images ../shared/data/coco128-seg] [lucid options ...]

Per arm it prints the epoch times from each run's results.csv (its time column is the time since the
start of training, in both), the median (min-max) of the epochs after the first over all pairs, and
the process CPU time (user + system, with its children: the loader workers). The reference runs in
this Python, which must hold the pinned ultralytics.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE_FIT = """
import sys
from ultralytics import YOLO
data, out, epochs, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
YOLO("yolo26n-seg.yaml").train(data=data, imgsz=160, batch=8, epochs=epochs, device="cpu", workers=workers,
                               plots=False, seed=0, pretrained=False, project=out, name="fit", exist_ok=True,
                               verbose=False)
"""


def dataset_yaml(images, out):
    """coco128-seg as one split for training and validation, with the 80 names of its classes.txt."""
    names = (images / "classes.txt").read_text().split("\n")
    names = [n for n in names if n.strip()]
    path = out / "coco128-seg.yaml"
    lines = [f"path: {images}", "train: images/train2017", "val: images/train2017", "names:"]
    lines += [f"  {i}: {n}" for i, n in enumerate(names)]
    path.write_text("\n".join(lines) + "\n")
    return path


def epoch_times(results_csv):
    with open(results_csv) as f:
        rows = list(csv.DictReader(f, skipinitialspace=True))
    elapsed = [float(r["time"]) for r in rows]
    return [round(b - a, 3) for a, b in zip([0.0] + elapsed, elapsed)]


def run(cmd, log, env):
    start = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed; see {log}")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lucid", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--images", default=str(HERE.parents[1] / "shared" / "data" / "coco128-seg"))
    a, extra = ap.parse_known_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data = dataset_yaml(Path(a.images).resolve(), out)
    env = dict(os.environ, LUCID_CACHE_DIR=str(out / "cache"), YOLO_OFFLINE="1")
    arms = {
        "lucid": lambda d: [a.lucid, "train", f"data={data}", "model=yolo26n-seg.yaml", "imgsz=160", "batch=8",
                            f"epochs={a.epochs}", "device=cpu", f"workers={a.workers}", "plots=False",
                            f"project={d}", "name=fit", "exist_ok=True", *extra],
        "reference": lambda d: [sys.executable, "-c", REFERENCE_FIT, str(data), str(d), str(a.epochs), str(a.workers)],
    }
    runs = {arm: [] for arm in arms}
    for pair in range(1, a.pairs + 1):
        order = list(arms) if pair % 2 else list(reversed(arms))
        for arm in order:
            d = out / f"{arm}-{pair}"
            wall, cpu = run(arms[arm](d), out / f"{arm}-{pair}.log", env)
            epochs = epoch_times(d / "fit" / "results.csv")
            runs[arm].append({"pair": pair, "process_s": round(wall, 2), "cpu_s": round(cpu, 2), "epoch_s": epochs})
            print(json.dumps({"arm": arm, **runs[arm][-1]}), flush=True)
    for arm, rs in runs.items():
        later = [e for r in rs for e in r["epoch_s"][1:]]
        cpu = [r["cpu_s"] for r in rs]
        print(f"{arm}: epochs after the first {statistics.median(later):.2f} s ({min(later):.2f}-{max(later):.2f}), "
              f"{len(later)} epochs; process CPU {statistics.median(cpu):.1f} s ({min(cpu):.1f}-{max(cpu):.1f})")


if __name__ == "__main__":
    main()
