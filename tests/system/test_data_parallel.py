"""Data-parallel training over Gloo on the CPU (`device=cpu world=2`): two processes with global
batch 8 train as one process with batch 8 does, per-step losses and final weights within 1e-6
relative (each tensor's largest difference against its largest value) and the same validation
metrics; two runs of the same world write the same bytes; a rank killed mid-epoch stops the world
with a message naming it, quickly; a 2-process run stopped mid-epoch resumes exactly; worlds that
cannot start are refused, naming the option."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, digest, failures, lucid, results_without_time, synth_data, train  # noqa: E402

# sync_bn: BatchNorm over the global batch, so both worlds normalise over the same 8 images.
ARGS = ["epochs=2", "batch=8", "imgsz=64", "workers=1", "device=cpu", "sync_bn=True", "plots=False"]


def tensors(path):
    from safetensors.numpy import load_file

    return load_file(str(path))


def worst_relative(a, b, prefixes=("model/", "ema/")):
    """The largest difference of the weights (model and EMA) against each tensor's largest value.
    Gradients and optimizer moments are left out: some parameters' gradients are rounding noise
    (e.g. a bias right before a normalisation), whose bits depend on the summation order."""
    worst, name = 0.0, None
    for k in b:
        if not k.startswith(prefixes):
            continue
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        scale = np.abs(y).max()
        if scale == 0:
            continue
        r = np.abs(x - y).max() / scale
        if r > worst:
            worst, name = r, k
    return worst, name


def columns(run, prefix):
    rows = [r.split(",") for r in (Path(run) / "results.csv").read_text().splitlines()]
    keep = [i for i, h in enumerate(rows[0]) if h.startswith(prefix)]
    return [[r[i] for i in keep] for r in rows[1:]]


def children(pid):
    """The world's rank processes, by rank."""
    out = {}
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for k in kids:
        try:
            env = dict(e.split("=", 1) for e in Path(f"/proc/{k}/environ").read_text().split("\0") if "=" in e)
            out[int(env["RANK"])] = int(k)
        except (OSError, KeyError, ValueError):
            pass
    return out


def start(args, env, project, name):
    return subprocess.Popen([LUCID, "train", *args, f"project={project}", f"name={name}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), TMPDIR=str(tmp))
        # Worlds that cannot be started are refused before any work, naming the option or variable.
        for extra, env_extra, message in [
                (["world=2", "device=0"], {}, "option world=2: several processes on one device"),
                (["world=2", "device=cpu", "batch=7"], {}, "option batch=7: the global batch is split evenly"),
                (["device=0,0"], {}, "option device=0,0: GPU 0 listed twice"),
                (["device=0,1", "world=3"], {}, "option world=3: device=0,1 names 2 GPUs"),
                (["device=cpu"], {"WORLD_SIZE": "2"}, "WORLD_SIZE is set but RANK is not"),
                (["device=cpu"], {"WORLD_SIZE": "2", "RANK": "5"}, "RANK=5: expected an integer in [0, 1]")]:
            r = lucid(["train", "epochs=1", f"project={tmp / 'refused'}", *extra], dict(env, **env_extra), expect=None)
            check(r.returncode == 1 and message in r.stderr and not (tmp / "refused").exists(),
                  f"refused: {' '.join(extra)} {env_extra or ''}")
        data = synth_data(tmp / "synth", env, 16, 8, 64)
        args = [f"data={data}", *ARGS]
        project = tmp / "runs"

        t0 = time.time()
        train(args, env, project, "one")
        t1 = time.time()
        out = train([*args, "world=2"], env, project, "two")
        t2 = time.time()
        print(f"1 process {t1 - t0:.1f} s, 2 processes {t2 - t1:.1f} s")
        check("world: 2 processes (gloo" in out, "the launcher announces a Gloo world of 2")
        one, two = project / "one", project / "two"
        check(not (project / "two2").exists(), "only rank 0 made a run folder")

        la = np.fromfile(one / "step_losses.f32", np.float32).astype(np.float64)
        lb = np.fromfile(two / "step_losses.f32", np.float32).astype(np.float64)
        check(la.size == lb.size and la.size > 0, f"both record {la.size} loss items")
        if la.size == lb.size:
            rel = (np.abs(la - lb) / np.maximum(np.abs(la), 1e-12)).max()
            check(rel <= 1e-6, f"per-step losses within 1e-6 relative (worst {rel:.2e})")
        wa, wb = tensors(one / "weights" / "last.safetensors"), tensors(two / "weights" / "last.safetensors")
        check(sorted(wa) == sorted(wb), "the checkpoints hold the same tensors")
        worst, name = worst_relative(wb, wa)
        check(worst <= 1e-6, f"final weights (model and EMA) within 1e-6 relative (worst {worst:.2e} in {name})")
        check(columns(one, "metrics/") == columns(two, "metrics/"), "validation metrics identical")
        va = np.array(columns(one, "val/"), dtype=np.float64)
        vb = np.array(columns(two, "val/"), dtype=np.float64)
        check(np.allclose(va, vb, rtol=1e-5, atol=0), "validation losses equal to the printed digits' last")

        train([*args, "world=2"], env, project, "again")
        check(digest(two / "weights" / "last.safetensors") == digest(project / "again" / "weights" / "last.safetensors")
              and digest(two / "step_losses.f32") == digest(project / "again" / "step_losses.f32"),
              "two runs of the same world write the same bytes")

        # A rank killed mid-epoch: the launcher names it and stops rank 0, well within the timeout.
        long_args = [f"data={data}", *[a for a in ARGS if not a.startswith("epochs")], "epochs=20", "world=2",
                     "dist_timeout=600"]
        proc = start(long_args, env, project, "killed")
        lines, killed = [], None
        for line in proc.stdout:
            lines.append(line)
            if line.lstrip().startswith("2/20"):
                ranks = children(proc.pid)
                if 1 in ranks:
                    os.kill(ranks[1], signal.SIGKILL)
                    killed = time.time()
                    break
        rest, _ = proc.communicate(timeout=120)
        stopped = time.time()
        text = "".join(lines) + rest
        check(killed is not None, "rank 1 was found and killed during epoch 2")
        check(proc.returncode == 1, f"the launcher exits with 1 (got {proc.returncode})")
        check("rank 1 was killed by signal 9" in text, "the message names rank 1 and its signal")
        if killed:
            check(stopped - killed < 30, f"the world stopped {stopped - killed:.1f} s after the kill")
        check(not children(proc.pid), "no rank is left running")

        # Resume: a 2-process run stopped (SIGTERM to the launcher) during epoch 2 continues exactly.
        proc = start([*args, "world=2"], env, project, "stopped")
        for line in proc.stdout:
            if line.lstrip().startswith("2/2") and "%" in line:
                proc.send_signal(signal.SIGTERM)
                break
        proc.communicate(timeout=120)
        stopped_run = project / "stopped"
        check((stopped_run / "weights" / "last.safetensors").exists(), "the stopped run has epoch 1's checkpoint")
        train([f"resume={stopped_run / 'weights' / 'last.safetensors'}"], env, project, "stopped")
        for what, a, b in [("last checkpoint", two / "weights" / "last.safetensors", stopped_run / "weights" / "last.safetensors"),
                           ("per-step losses", two / "step_losses.f32", stopped_run / "step_losses.f32")]:
            check(digest(a) == digest(b), f"resumed 2-process run: {what} equal to the uninterrupted one")
        check(results_without_time(two) == results_without_time(stopped_run),
              "resumed 2-process run: results.csv (but time) equal")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
