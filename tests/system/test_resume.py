"""Exact resume: a training run killed with SIGKILL in the middle of an epoch and resumed from its
last checkpoint ends with the same checkpoint bytes, per-step losses and results as a run that was
never interrupted. Also: two uninterrupted runs with the same seed give identical bytes."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, digest, results_without_time, train  # noqa: E402

ARGS = ["epochs=3", "batch=8", "imgsz=64", "workers=2", "device=cpu", "close_mosaic=1"]





def explain(p, q):
    """Names what differs between two checkpoints (metadata keys and tensors)."""
    import json

    from safetensors import safe_open

    with safe_open(p, "np") as fa, safe_open(q, "np") as fb:
        ma, mb = json.loads(fa.metadata()["lucid"]), json.loads(fb.metadata()["lucid"])
        print("metadata differences:", {k: (ma.get(k), mb.get(k)) for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)})
        ka, kb = set(fa.keys()), set(fb.keys())
        print("tensors only in one:", sorted(ka ^ kb)[:10])
        diff = [k for k in sorted(ka & kb) if not (fa.get_tensor(k) == fb.get_tensor(k)).all()]
        print("tensors differing:", len(diff), diff[:10])
    ha, hb = (Path(x).read_bytes() for x in (p, q))
    la, lb = (int.from_bytes(h[:8], "little") for h in (ha, hb))
    print("header lengths", la, lb, "first differing byte", next((i for i in range(min(len(ha), len(hb))) if ha[i] != hb[i]), None))
    i = next((i for i in range(min(len(ha), len(hb))) if ha[i] != hb[i]), 0)
    print(ha[max(0, i - 80):i + 80])
    print(hb[max(0, i - 80):i + 80])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        train(ARGS, env, project, "a")
        train(ARGS, env, project, "b")
        a, b = project / "a", project / "b"
        same = digest(a / "weights" / "last.safetensors") == digest(b / "weights" / "last.safetensors")
        print(f"same seed twice: checkpoint bytes {'equal' if same else 'DIFFER'}")
        if not same:
            sys.exit("two runs with the same seed wrote different checkpoints")

        # The interrupted run: killed once epoch 2 is under way (epoch 1's checkpoint is written).
        proc = subprocess.Popen([LUCID, "train", *ARGS, f"project={project}", "name=c"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        killed_at = None
        for line in proc.stdout:
            if line.lstrip().startswith("2/3") and "%" in line:
                proc.send_signal(signal.SIGKILL)
                killed_at = line.strip()
                break
        proc.wait()
        c = project / "c"
        if killed_at is None or proc.returncode != -signal.SIGKILL:
            sys.exit(f"the run was not killed mid-epoch (return code {proc.returncode})")
        print(f"killed during: {killed_at[:60]}...")
        train(ARGS, env, project, "c", [f"resume={c / 'weights' / 'last.safetensors'}"])
        checks = {
            "last checkpoint": digest(a / "weights" / "last.safetensors") == digest(c / "weights" / "last.safetensors"),
            "best checkpoint": digest(a / "weights" / "best.safetensors") == digest(c / "weights" / "best.safetensors"),
            "per-step losses": digest(a / "step_losses.f32") == digest(c / "step_losses.f32"),
            "results.csv (but time)": results_without_time(a) == results_without_time(c),
        }
        for k, v in checks.items():
            print(f"resumed vs uninterrupted: {k} {'equal' if v else 'DIFFER'}")
        if not all(checks.values()):
            explain(a / "weights" / "last.safetensors", c / "weights" / "last.safetensors")
            sys.exit("the resumed run differs from the uninterrupted one")


if __name__ == "__main__":
    main()
