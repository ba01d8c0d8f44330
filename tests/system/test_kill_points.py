"""Exact resume at every write boundary. A fit (3 epochs, 16 synthetic training images, imgsz 64,
CPU, a checkpoint every epoch) is killed with SIGKILL at every atomic write of every epoch, with the
temporary file complete but not renamed and just after the rename (the LUCID_FAULT_AT hook of
util/files.h), and for checkpoints also with half of the temporary file written: args.yaml,
results.csv, step_losses.f32, best (in the epochs that improve), epochN, fit_report.json, last and
report.html; and at a random moment of each epoch. After each kill the run goes on where it stands: `lucid train resume=` from its
last checkpoint, or the same command again while it has none. The killed-and-continued run must end
with the same files as a fit that never stopped: the same set of files, each byte-equal (results.csv
without its time column, fit_report.json without its time, memory, loader-wait, step-time and replay-routing fields, report.html without
its speed line and per-epoch table, which is results.csv's), no temporary file left; resuming it
then says that nothing is left to resume and changes nothing."""
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import (LUCID, checkpoint_state, digest, fit_report_without_measurements,  # noqa: E402
                        results_without_time, synth_data, train)

EPOCHS = 3
POINTS = ["before-rename", "after-rename"]
CHECKPOINT_POINTS = ["mid-write", *POINTS]  # a partly written temporary file: the large writes
RUN = Path("runs") / "run"  # relative: both runs write the same args.yaml and report.html
LAST = RUN / "weights" / "last.safetensors"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def attempt(base, args, env, fault=None, kill_after=None):
    """One process of the run in `base`: resumed if it has a checkpoint, else started (again)."""
    cmd = [str(LUCID), "train", f"resume={LAST}"] if (base / LAST).exists() else [str(LUCID), "train", *args]
    e = dict(env, LUCID_FAULT_AT=fault) if fault else env
    start = time.monotonic()
    p = subprocess.Popen(cmd, cwd=base, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=kill_after)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return p.returncode, out, time.monotonic() - start


def epoch_of(base):
    return checkpoint_state(base / LAST)["epoch"] if (base / LAST).exists() else 0


def temporaries(run):
    return sorted(str(p.relative_to(run)) for p in run.rglob("*.tmp.*"))


def files(run):
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())


def report_without_times(run):
    lines = (run / "report.html").read_text().splitlines()
    out, in_results = [], False
    for line in lines:
        if line.startswith("<h2>Results per epoch"):
            in_results = True
        if not in_results and "<th>speed</th>" not in line:
            out.append(line)
        if in_results and line.startswith("</table></div>"):
            in_results = False
    return out


def snapshot(run):
    return {f: ((run / f).stat().st_mtime_ns, digest(run / f)) for f in files(run)}


def main():
    seed = int(os.environ.get("LUCID_KILL_SEED", "0"))
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        env.pop("LUCID_FAULT_AT", None)
        data = synth_data(tmp / "data", env, n_train=16, n_val=8, imgsz=96)
        args = [f"data={data}", f"epochs={EPOCHS}", "batch=8", "imgsz=64", "workers=2", "device=cpu", "close_mosaic=1",
                "plots=False", "save_period=1", "project=runs", "name=run", "exist_ok=True"]
        ref, killed = tmp / "ref", tmp / "killed"
        ref.mkdir()
        killed.mkdir()
        t0 = time.monotonic()
        train(args[:-3], env, "runs", "run", ["exist_ok=True"], cwd=ref)
        print(f"uninterrupted fit: {time.monotonic() - t0:.1f} s", flush=True)
        # weights/best is written in the epochs whose state names them its best epoch (improvements and ties)
        improving = {e for e in range(1, EPOCHS + 1)
                     if checkpoint_state(ref / RUN / "weights" / f"epoch{e}.safetensors")["best_epoch"] == e}
        print(f"best written in epochs {sorted(improving)}; random kill seed {seed}", flush=True)

        def kill(file, point):
            before = epoch_of(killed)
            rc, out, secs = attempt(killed, args, env, fault=f"{file}:{point}:1")
            if rc != -9:
                sys.exit(f"{file}:{point} (from epoch {before}): not killed (exit {rc}):\n{out[-3000:]}")
            left = [t for t in temporaries(killed / RUN) if Path(t).name.startswith(file + ".tmp.")]
            check(bool(left) == (point != "after-rename"),
                  f"killed at {file}:{point} from epoch {before} after {secs:.1f} s, temporary files {left}")
            return secs

        for point in POINTS:
            kill("args.yaml", point)
        for epoch in range(1, EPOCHS + 1):
            writes = ["results.csv", "step_losses.f32"] + (["best.safetensors"] if epoch in improving else [])
            writes += [f"epoch{epoch}.safetensors"] + (["fit_report.json"] if epoch == EPOCHS else [])
            writes += ["last.safetensors"]
            for i, file in enumerate(writes):
                for point in CHECKPOINT_POINTS if file.endswith(".safetensors") else POINTS:
                    secs = kill(file, point)
                    if i == 0 and point == POINTS[0]:
                        # A random moment before this epoch's first write: start-up, training or validation.
                        # The time it takes varies with the machine's load, so the first write also kills it
                        # where the timer would come later.
                        at = rng.uniform(0.1, 0.7) * secs
                        rc, out, took = attempt(killed, args, env, fault=f"{file}:{point}:1", kill_after=at)
                        by = "at random" if took >= at else "at the first write, before the random moment"
                        check(rc == -9 and epoch_of(killed) == epoch - 1,
                              f"killed {by} ({at:.2f} s) of epoch {epoch} (exit {rc})")
            check(epoch_of(killed) == epoch, f"epoch {epoch} committed by weights/last")
        for point in POINTS:
            kill("report.html", point)

        run_a, run_c = ref / RUN, killed / RUN
        check(files(run_a) == files(run_c), f"same files: {files(run_a)} / {files(run_c)}")
        check(temporaries(run_c) == [], f"no temporary files left: {temporaries(run_c)}")
        for f in files(run_a):
            if f in ("results.csv", "fit_report.json", "report.html") or not (run_c / f).exists():
                continue
            check(digest(run_a / f) == digest(run_c / f), f"{f} byte-equal")
        check(results_without_time(run_a) == results_without_time(run_c), "results.csv equal but for time")
        fa, fc = fit_report_without_measurements(run_a), fit_report_without_measurements(run_c)
        check(fa == fc, "fit_report.json equal but for time and memory" +
              ("" if fa == fc else f": {[k for k in fa if fa.get(k) != fc.get(k)]}"))
        check(report_without_times(run_a) == report_without_times(run_c), "report.html equal but for times")

        before = snapshot(run_c)
        rc, out, _ = attempt(killed, args, env)
        check(rc == 1 and f"training to {EPOCHS} epochs is finished, nothing to resume" in out,
              f"a finished run is not resumed (exit {rc}): {out.strip()[-300:]}")
        check(snapshot(run_c) == before, "resuming the finished run changed nothing")
        print(f"total {time.monotonic() - t0:.0f} s", flush=True)
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
