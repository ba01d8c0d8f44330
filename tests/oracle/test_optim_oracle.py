"""Optimizer oracle: (1) parameter groups and three SGD, AdamW and MuSGD steps, and eight Adam,
Adamax, NAdam, RAdam (its plain steps, then rectified ones from step 6) and RMSprop steps, from the
same state against the reference package's optimizers (built by its trainer's build_optimizer: the
torch.optim classes), parameters within 1e-6 relative; (2) lr and momentum of every group and the accumulation count at every
iteration over warmup and 3 epochs, against a real reference training run (tiny synthetic dataset,
CPU), for SGD, MuSGD and the auto rule (AdamW here)."""
import math
import os
import subprocess
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, Comparison, run  # noqa: E402

os.environ.setdefault("YOLO_OFFLINE", "1")
warnings.filterwarnings("ignore")
from ultralytics.engine.trainer import BaseTrainer  # noqa: E402
from ultralytics.nn.tasks import SegmentationModel  # noqa: E402

TOOL = BUILD_DIR / "tests" / "optim_oracle_tool"
ADAM_FAMILY = ("AdamW", "Adam", "Adamax", "NAdam", "RAdam")
NC = 4


def check_steps(kind, tmp):
    torch.manual_seed(0)
    model = SegmentationModel("yolo26n-seg.yaml", nc=NC, verbose=False)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, tmp / "w.safetensors")
    fake = types.SimpleNamespace(args=types.SimpleNamespace(lr0=0.01, momentum=0.937, warmup_bias_lr=0.1), data={"nc": NC})
    opt = BaseTrainer.build_optimizer(fake, model, name=kind, lr=0.01, momentum=0.937, decay=5e-4, iterations=1e5)
    names = {id(p): n for n, p in model.named_parameters()}
    ref_groups = [[names[id(p)] for p in g["params"]] for g in opt.param_groups]

    g = torch.Generator().manual_seed(1)
    steps, ref = {}, {}
    params = dict(model.named_parameters())
    for k in range(3 if kind in ("SGD", "AdamW", "MuSGD") else 8):
        lrs = [0.01 * (1 + 0.3 * k) * (3 if i % 2 == 0 and kind == "MuSGD" else 1) for i in range(len(opt.param_groups))]
        # The Adam family's beta1 stays the momentum it was built with (no momentum key to warm).
        moms = [0.8 + 0.05 * k] * len(opt.param_groups) if kind not in ADAM_FAMILY else [0.937] * len(opt.param_groups)
        steps[f"{k}.lr"], steps[f"{k}.momentum"] = torch.tensor(lrs, dtype=torch.float64), torch.tensor(moms, dtype=torch.float64)
        for n, p in params.items():
            p.grad = torch.randn(p.shape, generator=g) * 0.1
            steps[f"{k}.grad.{n}"] = p.grad.clone()
        for grp, lr, m in zip(opt.param_groups, lrs, moms):
            grp["lr"] = lr
            if "momentum" in grp:
                grp["momentum"] = m
        opt.step()
        opt.zero_grad()
        for n, p in params.items():
            ref[f"{k}.{n}"] = p.detach().clone()
    save_file(steps, tmp / "steps.safetensors")
    out = run([TOOL, "step", kind, NC, tmp / "w.safetensors", tmp / "steps.safetensors", tmp / "ours.safetensors"])
    ours_groups = [line.split()[2:] for line in out.splitlines() if line.startswith("group ")]
    if ours_groups != ref_groups:
        sys.exit(f"{kind}: parameter groups differ: sizes {[len(x) for x in ours_groups]} vs {[len(x) for x in ref_groups]}")
    ours = load_file(tmp / "ours.safetensors")
    c = Comparison(1e-6)
    for name in sorted(ref):
        c.check(name, ours[name], ref[name])
    c.finish(f"{kind}: {len(ref_groups)} groups identical; {k + 1} steps")


def make_dataset(root, n=10, size=64):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for i in range(n if split == "train" else 2):
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(root / "images" / split / f"{i}.jpg")
            x, y = rng.uniform(0.3, 0.7, 2)
            pts = [(x - 0.2, y - 0.2), (x + 0.2, y - 0.2), (x + 0.2, y + 0.2), (x - 0.2, y + 0.2)]
            (root / "labels" / split / f"{i}.txt").write_text(f"{i % NC} " + " ".join(f"{a:.4f} {b:.4f}" for a, b in pts) + "\n")
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames: {list(range(NC))}\n")


def check_schedule(optimizer, tmp):
    from ultralytics import YOLO

    epochs, batch, n, warmup = 3, 4, 10, 1.5
    records = []

    def on_batch_end(trainer):
        rows = [(g["lr"], g["momentum"] if "momentum" in g else g["betas"][0]) for g in trainer.optimizer.param_groups]
        records.append((len(records), trainer.accumulate, rows))

    model = YOLO("yolo26n-seg.yaml")
    model.add_callback("on_train_batch_end", on_batch_end)
    model.train(data=str(tmp / "data" / "data.yaml"), epochs=epochs, imgsz=64, batch=batch, workers=0, device="cpu", val=False,
                plots=False, optimizer=optimizer, warmup_epochs=warmup, close_mosaic=0, amp=False, verbose=False,
                project=str(tmp / "runs"), name=optimizer, exist_ok=True)
    nb = math.ceil(n / batch)
    iterations = math.ceil(n / max(batch, 64)) * epochs
    out = run([TOOL, "schedule", optimizer, NC, epochs, nb, batch, warmup, iterations])
    ours = [line.split() for line in out.splitlines()]
    if len(ours) != len(records):
        sys.exit(f"schedule {optimizer}: {len(ours)} iterations vs reference {len(records)}")
    for (ni, acc, rows), line in zip(records, ours):
        got = [float(v) for v in line[2:]]
        want = [v for row in rows for v in row]
        if int(line[0]) != ni or int(line[1]) != acc or len(got) != len(want) or any(a != b for a, b in zip(got, want)):
            sys.exit(f"schedule {optimizer} iteration {ni}: ours {line} vs reference acc {acc} {want}")
    print(f"schedule {optimizer}: {len(records)} iterations x {len(records[0][2])} groups identical (lr, momentum, accumulate)")


def main():
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for kind in ("SGD", "AdamW", "MuSGD", "Adam", "Adamax", "NAdam", "RAdam", "RMSprop"):
            check_steps(kind, tmp)
        make_dataset(tmp / "data")
        for optimizer in ("SGD", "MuSGD", "auto"):
            check_schedule(optimizer, tmp)


if __name__ == "__main__":
    main()
