"""Stage replay over whole fits on the GPU: `lucid train` natively and with all three recordings
(capture_network, capture_segment_heads, capture_optimizer) on the embedded synthetic dataset must
write the same bytes: last and best checkpoints (model, optimizer, schedule state, EMA), per-step
losses and results.csv apart from its time column. The fit spans 4 epochs of 11 batches of 6 at
160 px: a partial last batch each epoch (64 = 10 x 6 + 4), mosaic batches of changing instance
counts, warmup over the first epoch with the accumulation count ramping from 1 to 4 (the
accumulation fallback: those steps run natively), EMA validation after every epoch and
close_mosaic in the last. A third fit repeats the replayed one (same bytes again). A fourth records
the whole step with the defaults (no capture option: capture_step is on by default; the native fit
turns it off with capture_step=False): after the device's set-up for both batch shapes, every step
replays, the warmup ramp and the partial batches included, except each input signature's and
capacity bucket's first use, which runs eagerly (the key is recorded at its second use, their number
bounded), and it writes the same bytes as the native fit."""
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import digest, results_without_time, train  # noqa: E402

ARGS = ["epochs=4", "batch=6", "nbs=24", "imgsz=160", "workers=2", "device=0", "warmup_epochs=1",
        "close_mosaic=1", "optimizer=MuSGD", "exist_ok=True"]
NATIVE = ["capture_step=False"]
REPLAY = ["capture_network=True", "capture_segment_heads=True", "capture_optimizer=True"]
STEP = []  # the default


def cuda_usable():
    try:
        import torch
        return torch.cuda.is_available() and torch.ones(1, device="cuda").sum().item() == 1
    except Exception:
        return False



def fingerprint(run):
    return {
        "last": digest(run / "weights" / "last.safetensors")[:16],
        "best": digest(run / "weights" / "best.safetensors")[:16],
        "step_losses": digest(run / "step_losses.f32")[:16],
        "results": results_without_time(run),
    }


def replay_summary(stdout):
    for line in stdout.splitlines():
        if line.startswith("replay: {"):
            return json.loads(line[len("replay: "):])
    sys.exit("no replay summary in the output:\n" + stdout[-3000:])


def main():
    if not cuda_usable():
        print("no usable CUDA device: skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), CUBLAS_WORKSPACE_CONFIG=":4096:8")
        project = tmp / "runs"
        train(ARGS, env, project, "native", NATIVE)
        out = train(ARGS, env, project, "replay", REPLAY)
        train(ARGS, env, project, "replay2", REPLAY)
        step_out = train(ARGS, env, project, "step", STEP)
        summary = replay_summary(out)
        step_summary = replay_summary(step_out)
        print(json.dumps(step_summary, indent=1))
        print(json.dumps(summary, indent=1))
        a, b, c, d = (fingerprint(project / n) for n in ("native", "replay", "replay2", "step"))
        for key in a:
            print(f"{key}: native {a[key] if key != 'results' else len(a[key])} replay "
                  f"{b[key] if key != 'results' else len(b[key])} equal={a[key] == b[key] == c[key]} "
                  f"capture_step equal={a[key] == d[key]}")
        failures = [k for k in a if not (a[k] == b[k] == c[k])]
        failures += [f"capture_step {k}" for k in a if a[k] != d[k]]
        ts = step_summary.get("training_step", {})
        # Every step of the default fit replays (warmup and partial batches included) except each
        # key's first use, which runs eagerly and is counted with its reason.
        first_use = [k for k in step_summary.get("native_reasons", {}) if k.startswith("training step:")]
        if not (ts.get("replayed_steps", 0) > 0 and 0 < ts.get("eager_steps", 0) == ts.get("native_steps", -1)
                and all("first use" in k for k in first_use)):
            failures.append(f"the default fit did not replay every step after each key's first use: {ts}")
        if "device: set up for training batches of 6 and 4 at 160 px" not in step_out:
            failures.append("the default fit did not set the device up for its two batch shapes before training")
        if not (ts.get("update_replayed_steps", 0) > 0 and ts.get("update_native_steps", 1) == 0):
            failures.append(f"capture_step did not replay every optimizer step: {ts}")
        if ts.get("recordings", 99) > ts.get("max_recordings", 0):
            failures.append(f"capture_step holds more recordings than its cap: {ts}")
        for stage in ("shared_features", "head_predictions", "optimizer_stages"):
            s = summary[stage]
            if not (s["recorded"] and s["replayed_steps"] > 0):
                failures.append(f"{stage} did not replay: {s}")
        reasons = summary["native_reasons"]
        if not any("accumulation" in k for k in reasons):
            failures.append("warmup steps did not fall back for the changing accumulation count")
        if not any("partial batch" in k for k in reasons):
            failures.append("partial batches did not run natively")
        if failures:
            sys.exit("replay differs from native: " + "; ".join(map(str, failures)))
        print("replay fits equal native fits byte for byte")


if __name__ == "__main__":
    main()
