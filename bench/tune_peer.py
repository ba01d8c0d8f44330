"""Hyperparameter evolution through a Python API, lucid_yolo's or the reference package's (the same
call: YOLO(model).tune(...)), for bench/tune_peer.sh.
  tune_peer.py tune IMPL --data DATA --project DIR [--model M] [--epochs E] [--iterations N] [--batch B]
                [--imgsz S] [--device D] [--seed S] [--concurrent C]
  tune_peer.py report NAME PROJECT WALL RC [--samples FILE] [--log FILE]
  tune_peer.py sample FILE                  the GPU (nvidia-smi) every 0.5 s until killed
IMPL: lucid (lucid_yolo; concurrent= trials at once) or ultralytics (its tuner has no concurrent=;
each trial is a `python -m ultralytics.cfg.__init__ train` subprocess of this interpreter, so the
package must be importable from PYTHONPATH, which the subprocess inherits). tune prints where the
package was imported from and one JSON line: the tune's wall seconds. report reads the arm's
tune_results.ndjson (both packages write it after each trial, so a tune cut short still reports its
finished trials) and prints one summary line: trials, best fitness (mAP50-95 of boxes plus masks,
the best epoch of a trial as each tuner reads it) and its iteration, the first trial's (the default
hyperparameters in both tuners), every trial's fitness in iteration order, and from the GPU samples
the peak device memory in use, the most compute processes seen at once and the mean utilisation."""
import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def tune(a):
    if a.impl == "lucid":
        import lucid_yolo
        from lucid_yolo import YOLO

        where, version, extra = lucid_yolo.__file__, lucid_yolo.__version__, {"concurrent": a.concurrent}
    else:
        import ultralytics
        from ultralytics import YOLO
        from ultralytics.cfg import _YOLO_CLI_COMMAND

        where, version, extra = ultralytics.__file__, ultralytics.__version__, {}
        print(f"trial command: {' '.join(_YOLO_CLI_COMMAND)} train ...", flush=True)
    print(f"{a.impl} {version} from {where}", flush=True)
    device = int(a.device) if a.device.isdigit() else a.device
    t = time.perf_counter()
    YOLO(a.model).tune(data=a.data, epochs=a.epochs, iterations=a.iterations, batch=a.batch, imgsz=a.imgsz,
                       device=device, plots=False, save=False, val=True, seed=a.seed, project=a.project, **extra)
    print(json.dumps({"impl": a.impl, "tune_wall_s": round(time.perf_counter() - t, 2)}), flush=True)


def sample(path):
    """One line per sample: time, device memory in use (MiB), utilisation (%), compute processes."""
    if not shutil.which("nvidia-smi"):
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    q = ["nvidia-smi"]  # the machine's one GPU (the first, where there are more)
    with open(path, "w") as f:
        while True:
            try:
                gpu = subprocess.run(q + ["--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout.split("\n")[0].split(",")
                apps = subprocess.run(q + ["--query-compute-apps=pid", "--format=csv,noheader"],
                                      capture_output=True, text=True, timeout=10).stdout.split()
                f.write(f"{time.time():.2f} {int(gpu[0])} {int(gpu[1])} {len(apps)}\n")
                f.flush()
            except (ValueError, IndexError, subprocess.SubprocessError):
                pass
            time.sleep(0.5)


def best_index(records):
    """As both tuners: the first record of highest fitness among those that trained, else among all."""
    trained = [i for i, r in enumerate(records)
               if any(m and d not in r.get("failed_datasets", ()) for d, m in r.get("datasets", {}).items())]
    pool = trained or list(range(len(records)))
    return max(pool, key=lambda i: (records[i].get("fitness", 0.0), -i))


def report(a):
    files = sorted(Path(a.project).glob("*/tune_results.ndjson"))
    records = []
    if files:
        with open(files[0], encoding="utf-8") as f:
            records = sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["iteration"])
    failed = sum(bool(r.get("failed_datasets")) for r in records)
    wall = float(a.wall)
    line = f"{a.name:<12} rc={a.rc:<3} wall {wall:7.1f} s  trials {len(records)}"
    if failed:
        line += f" ({failed} failed)"
    if records:
        b = records[best_index(records)]
        line += f", {wall / len(records):.1f} s each" if a.rc == "0" else ""  # a cut tune: its last trial unfinished
        line += (f"; best fitness {b['fitness']:.5f} at iteration {b['iteration']}"
                 f"; iteration 1 (defaults) {records[0]['fitness']:.5f}")
    if a.log and Path(a.log).exists():  # the tune's own clock, as the tuner printed it
        said = [s for s in Path(a.log).read_text(errors="replace").splitlines() if s.startswith('{"impl"')]
        if said:
            line += f"; tune() {json.loads(said[-1])['tune_wall_s']:.1f} s"
    if a.samples and Path(a.samples).exists():
        rows = [s.split() for s in Path(a.samples).read_text().splitlines() if len(s.split()) == 4]
        if rows:
            line += (f"; GPU peak {max(int(r[1]) for r in rows)} MiB, {max(int(r[3]) for r in rows)} processes at most,"
                     f" mean util {sum(int(r[2]) for r in rows) / len(rows):.0f}%")
    print(line)
    if records:
        fitness = " ".join(f"{r['fitness']:.5f}" for r in records)
        print(f"{'':<12} fitness by iteration: {fitness}  ({files[0].parent})")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tune")
    t.add_argument("impl", choices=["lucid", "ultralytics"])
    t.add_argument("--data", required=True)
    t.add_argument("--project", required=True)
    t.add_argument("--model", default="yolo26n-seg.yaml")
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--iterations", type=int, default=8)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--imgsz", type=int, default=640)
    t.add_argument("--device", default="0")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--concurrent", type=int, default=1)
    r = sub.add_parser("report")
    r.add_argument("name")
    r.add_argument("project")
    r.add_argument("wall")
    r.add_argument("rc")
    r.add_argument("--samples")
    r.add_argument("--log")
    s = sub.add_parser("sample")
    s.add_argument("file")
    a = ap.parse_args()
    if a.cmd == "tune":
        tune(a)
    elif a.cmd == "report":
        report(a)
    else:
        sample(a.file)


if __name__ == "__main__":
    sys.exit(main())
