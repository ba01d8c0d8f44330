"""TensorBoard events read back with TensorBoard's own reader (event_accumulator). A tiny fit on the
embedded synthetic dataset with tensorboard=True, extended by a resume to a third epoch, leaves event
files in its run folder in which every scalar column of results.csv (all but epoch, the step, and
time) has exactly one value per epoch, equal to the CSV's value as float32; with cairo, every plot the
run drew is there as a PNG image at the last epoch. The same fit with tensorboard=False writes the
same results (less time), step losses and weights, and no event file."""
import os
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, digest, failures, lucid, results_without_time, train  # noqa: E402

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402

PLOTS = ["results.png", "BoxPR_curve.png", "MaskPR_curve.png", "confusion_matrix.png", "train_batch0.jpg",
         "val_batch0_labels.jpg", "val_batch0_pred.jpg"]


def csv_rows(run):
    lines = (run / "results.csv").read_text().splitlines()
    header = lines[0].split(",")
    return header, [dict(zip(header, line.split(","))) for line in lines[1:]]


def read_events(run):
    acc = event_accumulator.EventAccumulator(str(run), size_guidance={event_accumulator.SCALARS: 0,
                                                                      event_accumulator.IMAGES: 0})
    acc.Reload()
    return acc


def check_scalars(run, acc):
    header, rows = csv_rows(run)
    columns = [c for c in header if c not in ("epoch", "time")]
    tags = acc.Tags()["scalars"]
    check(sorted(tags) == sorted(columns), f"the scalar tags are results.csv's columns less epoch and time ({tags})")
    for c in columns:
        events = acc.Scalars(c) if c in tags else []
        steps = [e.step for e in events]
        want_steps = [int(r["epoch"]) for r in rows]
        if steps != want_steps:
            check(False, f"{c}: one value per epoch at steps {want_steps} (got {steps})")
            continue
        got = np.array([e.value for e in events], dtype=np.float32)
        want = np.array([float(r[c]) for r in rows], dtype=np.float32)
        check(np.array_equal(got, want, equal_nan=True), f"{c}: the events hold results.csv's values ({got} vs {want})")


def check_images(run, acc):
    if not (run / "results.png").exists():
        print("skip images: the build has no cairo (no plots drawn)")
        return
    tags = acc.Tags()["images"]
    for name in PLOTS:
        stem = Path(name).stem
        if stem not in tags:
            check(False, f"image {stem} logged")
            continue
        image = acc.Images(stem)[-1]  # the resumed fit's, after the first fit's at its last epoch
        png = image.encoded_image_string
        check(png[:8] == b"\x89PNG\r\n\x1a\n", f"image {stem} is PNG")
        width, height = struct.unpack(">II", png[16:24])
        check((width, height) == (image.width, image.height) and width > 0,
              f"image {stem}: {image.width}x{image.height} as its PNG")
        _, rows = csv_rows(run)
        check(image.step == len(rows), f"image {stem} at the last epoch ({image.step})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), LUCID_CONFIG_DIR=str(tmp / "config"))
        common = ["epochs=2", "imgsz=64", "workers=2"]
        out = train([*common, "tensorboard=True"], env, tmp / "runs", "tb")
        run = tmp / "runs" / "tb"
        check(f"tensorboard --logdir {run}" in out, "the fit says how to start TensorBoard")
        train(common, env, tmp / "runs", "plain")
        plain = tmp / "runs" / "plain"
        check(not list(plain.glob("*tfevents*")), "tensorboard=False writes no event file")
        check(results_without_time(run) == results_without_time(plain), "results.csv is the same less its time column")
        for f in ("step_losses.f32", "weights/last.safetensors", "weights/best.safetensors"):
            check(digest(run / f) == digest(plain / f), f"{f} is the same with and without events")

        lucid(["train", f"resume={run / 'weights' / 'last.safetensors'}", "epochs=3", "tensorboard=True"], env)
        files = sorted(run.glob("events.out.tfevents.*"))
        check(len(files) == 2, f"one event file per process ({[f.name for f in files]})")
        acc = read_events(run)
        check_scalars(run, acc)
        check_images(run, acc)
    if failures:
        sys.exit(f"{len(failures)} failed")


if __name__ == "__main__":
    main()
