#!/usr/bin/env python3
"""Early-stopping oracle: lucid's validation, best and early-stop decisions (train/early_stopping.h,
through train_oracle_tool stop) against the reference's on the same per-epoch fitness.

- Real reference trainings (tiny dataset, CPU) whose validator is replaced by one returning scripted
  fitness: the epochs trained and the epoch whose checkpoint best.pt holds (read from best.pt after
  every save) equal lucid's, for val=False, all-zero fitness, ties, patience 0, 1 and 2.
- The reference's own EarlyStopping and BaseTrainer.validate driven by its epoch-end rules (validate
  when val, final, possible_stop or stop; stopper(epoch + 1, fitness); best.pt when best_fitness ==
  fitness) on longer and random sequences: patience 100 with and without validation, and 36 seeded
  sequences rich in zeros and ties for patience 1, 2 and 3. Per epoch (validated, best written) and
  the stop epoch and best epoch equal lucid's.
"""
import logging
import os
import random
import sys
import tempfile
import types
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, run  # noqa: E402

os.environ.setdefault("YOLO_OFFLINE", "1")
warnings.filterwarnings("ignore")

TOOL = BUILD_DIR / "tests" / "train_oracle_tool"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


def lucid_decisions(patience, epochs, val, fitness):
    """Per epoch (validated, best), then (epochs trained, best epoch)."""
    rows, end = [], None
    for line in run([TOOL, "stop", patience, epochs, val, *[repr(float(f)) for f in fitness]]).splitlines():
        parts = line.split()
        if parts[0] == "end":
            end = (int(parts[1]), int(parts[2]))
        else:
            rows.append((parts[1] == "1", parts[2] == "1"))
    return rows, end


# ---- the reference's epoch-end rules on scripted fitness ------------------------------------------------

def reference_decisions(patience, epochs, val, fitness):
    """engine/trainer.py's _do_train epoch end, with the reference's EarlyStopping and validate()."""
    import torch
    from ultralytics.engine.trainer import BaseTrainer
    from ultralytics.utils import LOGGER
    from ultralytics.utils.torch_utils import EarlyStopping

    # loss: validate() evaluates its fallback fitness (-loss) even where the metrics hold one
    tr = types.SimpleNamespace(ema=None, world_size=1, best_fitness=None, fitness=None, metrics=None,
                               loss=torch.zeros(()))
    LOGGER.setLevel(logging.WARNING)  # its stop message, once per stopped sequence
    stopper, stop = EarlyStopping(patience=patience), False
    rows, best_epoch, trained = [], 0, 0
    for epoch in range(epochs):
        final_epoch = epoch + 1 >= epochs
        validated = bool(val or final_epoch or stopper.possible_stop or stop)
        if validated:
            tr.validator = lambda _trainer, f=fitness[epoch]: {"fitness": f}
            tr.metrics, tr.fitness = BaseTrainer.validate(tr)
        stop |= stopper(epoch + 1, tr.fitness) or final_epoch
        best = tr.best_fitness == tr.fitness  # save_model
        if best:
            best_epoch = epoch + 1
        rows.append((validated, best))
        trained = epoch + 1
        if stop:
            break
    return rows, (trained, best_epoch)


def check_rules():
    cases = [
        ("val=False patience=100", 100, 102, "False", [0.0] * 101 + [0.3]),
        ("val=False patience=2", 2, 5, "False", [0.0] * 4 + [0.3]),
        ("val=True patience=100, best at 1", 100, 105, "True", [0.5] + [0.1] * 104),
        ("val=True patience=100, all 0", 100, 105, "True", [0.0] * 105),
        ("val=True patience=1, all 0", 1, 6, "True", [0.0] * 6),
    ]
    rng = random.Random(0)
    for k in range(36):  # each a process start of the tool (about a second)
        patience = (1, 2, 3)[k % 3]
        epochs = rng.randint(1, 20)
        levels = [0.0, 0.0, 0.1, 0.2, 0.3]
        cases.append((f"random {k} patience={patience}", patience, epochs, rng.choice(["True", "True", "False"]),
                      [rng.choice(levels) for _ in range(epochs)]))
    stops = 0
    for name, patience, epochs, val, fitness in cases:
        ref = reference_decisions(patience, epochs, val == "True", fitness)
        ours = lucid_decisions(patience, epochs, val, fitness)
        stops += ref[1][0] < epochs
        check(ours == ref, f"{name} fitness {fitness}: ours {ours} vs reference {ref}")
    print(f"reference rules: {len(cases)} sequences, per-epoch validation and best writes, stop and best epochs "
          f"equal ({stops} stopped early)")
    for name, patience, epochs, val, fitness in cases[:5]:
        trained, best = reference_decisions(patience, epochs, val == "True", fitness)[1]
        print(f"  {name}: {trained} of {epochs} epochs, best epoch {best}")


# ---- real reference trainings -----------------------------------------------------------------------------

def make_dataset(root):
    from PIL import Image

    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for i in range(4 if split == "train" else 1):
            rgb = np.random.default_rng(i).integers(0, 255, (64, 64, 3), dtype=np.uint8)
            Image.fromarray(rgb).save(root / "images" / split / f"{i}.jpg")
            (root / "labels" / split / f"{i}.txt").write_text("0 0.3 0.3 0.7 0.3 0.7 0.7 0.3 0.7\n")
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames: ['a']\n")
    return root / "data.yaml"


class ScriptedValidator:
    """Stands in for the reference's SegmentationValidator: epoch e's validation gives fitness[e]."""

    def __init__(self, real, fitness):
        self.real, self.fitness, self.args, self.metrics = real, fitness, real.args, real.metrics
        self.dataloader = real.dataloader

    def __call__(self, trainer=None, model=None):
        if trainer is None:  # final_eval on best.pt
            return {"fitness": 0.0}
        return {"fitness": self.fitness[trainer.epoch]}


def reference_run(data, tmp, name, patience, epochs, val, fitness):
    import torch
    from ultralytics import YOLO
    from ultralytics.models.yolo.segment.train import SegmentationTrainer

    best_epochs, trained = [], []

    def model_save(tr):
        trained.append(tr.epoch + 1)
        ckpt = torch.load(tr.best, map_location="cpu", weights_only=False) if tr.best.exists() else {"epoch": -1}
        best_epochs.append(ckpt["epoch"] + 1)

    real_get_validator = SegmentationTrainer.get_validator
    SegmentationTrainer.get_validator = lambda tr: ScriptedValidator(real_get_validator(tr), fitness)
    try:
        model = YOLO("yolo26n-seg.yaml")
        model.add_callback("on_model_save", model_save)
        model.train(data=str(data), epochs=epochs, patience=patience, val=val, imgsz=64, batch=4, nbs=4, workers=0,
                    device="cpu", plots=False, close_mosaic=0, amp=False, verbose=False, project=str(tmp / "runs"),
                    name=name, exist_ok=True)
    finally:
        SegmentationTrainer.get_validator = real_get_validator
    return trained[-1], best_epochs[-1]


def check_trainings(tmp):
    data = make_dataset(tmp / "data")
    cases = [
        ("val=False epochs=5 patience=2", 2, 5, False, [0.0] * 4 + [0.3]),
        ("all 0 epochs=6 patience=1", 1, 6, True, [0.0] * 6),
        ("rise then fall patience=2", 2, 6, True, [0.1, 0.3, 0.2, 0.2, 0.25, 0.4]),
        ("tie patience=2", 2, 6, True, [0.2, 0.2, 0.1, 0.2, 0.1, 0.1]),
        ("zeros, rise, patience=1", 1, 6, True, [0.0, 0.0, 0.0, 0.1, 0.05, 0.05]),
        ("falling patience=0", 0, 4, True, [0.5, 0.4, 0.3, 0.2]),
    ]
    for k, (name, patience, epochs, val, fitness) in enumerate(cases):
        ref = reference_run(data, tmp, f"r{k}", patience, epochs, val, fitness)
        ours = lucid_decisions(patience, epochs, str(val), fitness)[1]
        check(ours == ref, f"training {name}: ours (epochs, best epoch) {ours} vs reference {ref}")
        print(f"training {name}: reference and lucid {ref[0]} of {epochs} epochs, best epoch {ref[1]}"
              + ("" if ours == ref else f" (lucid {ours})"))


def main():
    check_rules()
    with tempfile.TemporaryDirectory() as tmp:
        check_trainings(Path(tmp))
    if FAILURES:
        sys.exit("\n".join(FAILURES))


if __name__ == "__main__":
    main()
