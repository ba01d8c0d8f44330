"""The tuner's mutation against the reference's (ultralytics engine/tuner.py Tuner._mutate and
_constrain): for each history below and each of 150 seeds, the reference's _mutate with its random
generator seeded (np.random.default_rng patched to the seeded one) and lucid_yolo/tuner.py's mutate
with the same generator propose the same hyperparameters, value for value. Histories: one row of
the starting values (the second trial of a tune), 12 rows (fitness-weighted parents, a stale best),
40 rows (the elite covariance step), a custom space with a gain, an integer key and an empty range,
and a history full of duplicates (the fallback draws). Then constrain against _constrain on random
values, the bounds and rounding of every proposal, and the tune plots written from a results file
(matplotlib is in this environment). lucid_yolo/tuner.py is loaded on its own (numpy only)."""
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
spec = importlib.util.spec_from_file_location("lucid_tuner", SOURCE_DIR / "python" / "lucid_yolo" / "tuner.py")
tuner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tuner)

from ultralytics.engine import tuner as ref_tuner  # noqa: E402

SEEDS = range(150)
REFERENCE_SPACE = {**tuner.DEFAULT_SPACE, "bgr": (0.0, 1.0)}  # the reference's own, bgr included
CUSTOM_SPACE = {"lr0": (1e-4, 1e-1), "momentum": (0.6, 0.98, 0.3), "close_mosaic": (0.0, 10.0),
                "mosaic": (0.5, 0.5), "degrees": (0.0, 45.0)}
failures = []


def reference_tuner(space, tmp):
    t = ref_tuner.Tuner(args={"model": "yolo26n-seg.yaml", "data": "coco8-seg.yaml", "space": dict(space),
                              "project": str(tmp), "name": "tune", "plots": False}, model=object())
    t.tune_dir.mkdir(parents=True, exist_ok=True)
    return t


def starting(space):
    defaults = {k: 0.0 for k in space}
    defaults.update({"lr0": 0.01, "lrf": 0.01, "momentum": 0.937, "weight_decay": 0.0005, "warmup_epochs": 3.0,
                     "warmup_momentum": 0.8, "box": 7.5, "cls": 0.5, "dfl": 1.5, "hsv_h": 0.015, "hsv_s": 0.7,
                     "hsv_v": 0.4, "translate": 0.1, "scale": 0.5, "fliplr": 0.5, "mosaic": 1.0, "close_mosaic": 10})
    return tuner.constrain({k: defaults[k] for k in space}, space)


def random_records(space, n, rng, stale_best=False, duplicates=False):
    start = starting(space)
    records = [{"iteration": 1, "fitness": 0.0, "hyperparameters": start}]
    for i in range(2, n + 1):
        hyp = dict(start) if duplicates else tuner.constrain(
            {k: v[0] + rng.random() * (v[1] - v[0]) for k, v in space.items()}, space)
        fitness = round(float(rng.random()) * (2.0 if (stale_best and i == 3) else 1.0), 5)
        records.append({"iteration": i, "fitness": fitness, "hyperparameters": hyp, "datasets": {"d": {"fitness": fitness}}})
    return records


def compare(name, space, records, tmp):
    t = reference_tuner(space, tmp / name)
    with open(t.tune_file, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    history = tuner.history_array(records, space, starting(space))
    real_rng = np.random.default_rng
    same = 0
    for seed in SEEDS:
        with mock.patch.object(ref_tuner.np.random, "default_rng", lambda *a: real_rng(seed)):
            try:
                ref = t._mutate()
            except RuntimeError as e:
                ref = f"RuntimeError {e}"
        try:
            ours = tuner.mutate(history, space, real_rng(seed))
        except RuntimeError as e:
            ours = f"RuntimeError {e}"
        if ours != ref:
            failures.append(f"{name} seed {seed}: ours {ours} != reference {ref}")
            continue
        same += 1
        check_bounds(name, space, ours)
    print(f"{name}: {same}/{len(SEEDS)} proposals equal to the reference's ({len(records)} results)")


def check_bounds(name, space, hyp):
    for k, (low, high, *_) in space.items():
        v = hyp[k]
        if not low <= v <= high:
            failures.append(f"{name}: {k}={v} outside [{low}, {high}]")
        if k in tuner.INT_KEYS and not isinstance(v, int):
            failures.append(f"{name}: {k}={v!r} is not an integer")
        if k not in tuner.INT_KEYS and round(v, 5) != v:
            failures.append(f"{name}: {k}={v} not rounded to 5 decimals")


def compare_constrain(tmp):
    t = reference_tuner(REFERENCE_SPACE, tmp / "constrain")
    rng = np.random.default_rng(7)
    for _ in range(500):
        hyp = {k: float(v[0] + (rng.random() * 1.4 - 0.2) * (v[1] - v[0])) for k, v in REFERENCE_SPACE.items()}
        ref = t._constrain(dict(hyp))
        ours = tuner.constrain(hyp, REFERENCE_SPACE)
        if ours != ref or [type(v) for v in ours.values()] != [type(v) for v in ref.values()]:
            failures.append(f"constrain: ours {ours} != reference {ref}")
            return
    print("constrain: 500 random points equal to the reference's")


def check_plots(tmp):
    rng = np.random.default_rng(3)
    records = random_records(tuner.DEFAULT_SPACE, 6, rng)
    file = tmp / "plots" / "tune_results.ndjson"
    file.parent.mkdir()
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    if not tuner.plot_tune_results(file):
        failures.append("plot_tune_results wrote nothing with matplotlib installed")
    for png in ("tune_scatter_plots.png", "tune_fitness.png"):
        if not (file.parent / png).stat().st_size > 10000:
            failures.append(f"{png} missing or empty")
    print("plots: tune_scatter_plots.png and tune_fitness.png written")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        compare("second trial", REFERENCE_SPACE, random_records(REFERENCE_SPACE, 1, rng), tmp)
        compare("12 results", REFERENCE_SPACE, random_records(REFERENCE_SPACE, 12, rng, stale_best=True), tmp)
        compare("40 results", REFERENCE_SPACE, random_records(REFERENCE_SPACE, 40, rng), tmp)
        compare("custom space", CUSTOM_SPACE, random_records(CUSTOM_SPACE, 35, rng), tmp)
        compare("duplicates", {"close_mosaic": (0.0, 2.0)}, random_records({"close_mosaic": (0.0, 2.0)}, 3, rng,
                                                                        duplicates=True), tmp)
        compare_constrain(tmp)
        check_plots(tmp)
    if failures:
        print("\n".join(failures[:20]))
        sys.exit(f"{len(failures)} differences from the reference's tuner")
    print("tune mutation: equal to the reference's")


if __name__ == "__main__":
    main()
