"""Data parallel over NCCL with replay (needs 2 GPUs): `device=0,1` natively, with the three stage
recordings and with capture_step=True (the gradient all-reduce, the loss normalisers' and sync_bn's
all-reduces inside the recorded graphs) must write the same bytes; the 2-GPU native fit matches a
1-GPU fit of the same global batch within 1e-4 relative (FP32: amp=False, sync_bn=True; cuDNN picks kernels by batch shape)."""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, digest, failures, results_without_time, train  # noqa: E402

ARGS = ["epochs=3", "batch=8", "nbs=32", "imgsz=160", "workers=2", "warmup_epochs=1", "close_mosaic=1",
        "optimizer=MuSGD", "amp=False", "sync_bn=True", "exist_ok=True", "plots=False"]
STAGES = ["capture_network=True", "capture_segment_heads=True", "capture_optimizer=True"]


def gpus():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def main():
    if gpus() < 2:
        print("no usable CUDA device pair (data parallel needs 2 GPUs): skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), CUBLAS_WORKSPACE_CONFIG=":4096:8", TMPDIR=str(tmp))
        project = tmp / "runs"
        train([*ARGS, "device=0", "capture_step=False"], env, project, "one")
        train([*ARGS, "device=0,1", "capture_step=False"], env, project, "native")
        train([*ARGS, "device=0,1", *STAGES], env, project, "stages")
        out = train([*ARGS, "device=0,1", "capture_step=True"], env, project, "step")
        print("\n".join(line for line in out.splitlines() if line.startswith("replay:")))
        native = project / "native"
        for arm in ("stages", "step"):
            run = project / arm
            for f in ("weights/last.safetensors", "step_losses.f32"):
                check(digest(native / f) == digest(run / f), f"2 GPUs, {arm}: {f} equal to native")
            check(results_without_time(native) == results_without_time(run), f"2 GPUs, {arm}: results.csv equal")
        la = np.fromfile(project / "one" / "step_losses.f32", np.float32).astype(np.float64)
        lb = np.fromfile(native / "step_losses.f32", np.float32).astype(np.float64)
        rel = (np.abs(la - lb) / np.maximum(np.abs(la), 1e-12)).max() if la.size == lb.size else np.inf
        check(rel <= 1e-4, f"1 GPU against 2 GPUs: per-step losses within 1e-4 relative (worst {rel:.2e})")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
