"""Early stopping end to end (CPU): `lucid train epochs=5 val=False patience=2` trains all 5 epochs, as
the reference does (no validation: no early stop), and its best weights are the last epoch's (the
EMA weights of weights/best and weights/last equal, both at epoch 5). The decisions themselves are
checked against the reference's in oracle/test_early_stopping_oracle.py."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, checkpoint_state, failures, results_without_time, synth_data, train  # noqa: E402


def ema_tensors(path):
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys() if k.startswith("ema/")}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "LUCID_CACHE_DIR": str(tmp / "cache")}
        data = synth_data(tmp / "synth", env, 8, 4, 64)
        out = train([f"data={data}", "epochs=5", "val=False", "patience=2", "batch=4", "imgsz=64", "workers=2",
                     "device=cpu", "plots=False"], env, tmp / "runs", "nv")
        run = tmp / "runs" / "nv"
        check(len(results_without_time(run)) == 6, "val=False patience=2: all 5 epochs trained (results.csv rows)")
        check("Stopping early" not in out, "val=False: no early stop")
        best, last = checkpoint_state(run / "weights" / "best.safetensors"), checkpoint_state(run / "weights" / "last.safetensors")
        check(best["epoch"] == 5 and best["best_epoch"] == 5 and last["best_epoch"] == 5,
              f"best is the last epoch (best at epoch {best['epoch']}, best_epoch {best['best_epoch']})")
        b, l = ema_tensors(run / "weights" / "best.safetensors"), ema_tensors(run / "weights" / "last.safetensors")
        check(b.keys() == l.keys() and all((b[k] == l[k]).all() for k in b), "best's EMA weights are last's")
        check(f"Validating {run / 'weights' / 'best.safetensors'}" in out, "the final validation validates best")
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
