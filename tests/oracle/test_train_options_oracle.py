#!/usr/bin/env python3
"""Train-options oracle: lucid's time=, fraction=, single_cls=, rect= and AutoBatch rules against the
reference package.

- time: a real reference training (tiny dataset, CPU) whose trainer clock is replaced by one that
  advances by scripted epoch durations, batch by batch; lucid's time decisions (train/time_budget.h)
  and schedule on the same durations must give the same per-epoch lf, batches trained, re-estimated
  epochs and stop, including a stop inside an epoch.
- fraction and single_cls: the reference dataset's image list and classes (YOLODataset with fraction
  and single_cls) equal lucid's train index, a corrupt image and a class id beyond nc included.
- rect: the reference's rect training dataset (build_yolo_dataset, rect=True, mode train: aspect
  order, batch shapes with pad 0) equals lucid's rect training batches (order, images, shapes).
- AutoBatch: the reference's autobatch() with its device and profiler replaced by given memory
  figures picks the batch lucid's choose_batch picks from the same figures (8.4.190 and later: the
  rule lucid follows; 8.4.114's differed).
"""
import math
import os
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
NC = 3
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


def write_image(path, h, w, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


def make_dataset(root, sizes, classes=None):
    """train/val of images at sizes (h, w), one square polygon each (class classes[i] or i % NC)."""
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes if split == "train" else sizes[:2]):
            write_image(root / "images" / split / f"{i:02d}.jpg", h, w, i)
            c = classes[i] if classes and split == "train" else i % NC
            (root / "labels" / split / f"{i:02d}.txt").write_text(f"{c} 0.3 0.3 0.7 0.3 0.7 0.7 0.3 0.7\n")
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames: {list(range(NC))}\n")
    return root / "data.yaml"


# ---- time ------------------------------------------------------------------------------------------

def reference_time_run(data, tmp, hours, seconds, n_batches, name):
    from ultralytics import YOLO
    import ultralytics.engine.trainer as trainer_module

    clock = [0.0]
    fake_time = types.SimpleNamespace(time=lambda: clock[0], perf_counter=lambda: clock[0], sleep=lambda s: None)
    records, lfs, batches = [], [], [0]

    def epoch_start(tr):
        lfs.append(tr.lf(tr.epoch))
        batches[0] = 0

    def batch_start(tr):
        clock[0] += seconds[min(tr.epoch, len(seconds) - 1)] / n_batches
        batches[0] += 1

    def fit_epoch_end(tr):
        if batches[0]:  # final_eval calls this again (at epoch + 1) without training a batch
            records.append((tr.epoch, lfs[-1], batches[0], tr.epochs, bool(tr.stop)))
        batches[0] = 0

    model = YOLO("yolo26n-seg.yaml")
    model.add_callback("on_train_epoch_start", epoch_start)
    model.add_callback("on_train_batch_start", batch_start)
    model.add_callback("on_fit_epoch_end", fit_epoch_end)
    real = trainer_module.time
    trainer_module.time = fake_time
    try:
        model.train(data=str(data), epochs=100, time=hours, imgsz=64, batch=4, nbs=4, workers=0, device="cpu", val=False,
                    plots=False, close_mosaic=0, amp=False, verbose=False, project=str(tmp / "runs"), name=name,
                    exist_ok=True)
    finally:
        trainer_module.time = real
    return records


def check_time(tmp):
    data = make_dataset(tmp / "time", [(64, 64)] * 10)
    n_batches = math.ceil(10 / 4)
    scenarios = {
        # estimates 4, then 5 (the batch times sum to just under 50 s in floating point), and the time
        # runs out after the first batch of epoch 5
        "steady": (100 / 3600, [30, 20, 25]),
        # estimates 4, 4, then 3 as epoch 3 stops after its second of three batches, the time being up
        "cut": (100 / 3600, [30, 30, 90]),
        # the estimate grows as epochs get faster (3, 5, 5, 6, 6, 7): the schedule is stretched, and the
        # fit ends with the last epoch of the count it began with
        "stretch": (60 / 3600, [20, 8, 8, 8]),
    }
    for name, (hours, seconds) in scenarios.items():
        ref = reference_time_run(data, tmp, hours, seconds, n_batches, name)
        out = run([TOOL, "time", repr(hours), 100, n_batches, 0.01, *seconds])
        ours = []
        for line in out.split("\n"):
            if line.strip():
                e, lf, b, n, stop = line.split()
                ours.append((int(e), float(lf), int(b), int(n), stop == "1"))
        check(len(ours) == len(ref), f"time {name}: {len(ours)} epochs vs reference {len(ref)}: {ours} vs {ref}")
        for o, r in zip(ours, ref):
            check(o[0] == r[0] and o[2:] == r[2:] and abs(o[1] - r[1]) <= 1e-12,
                  f"time {name} epoch {r[0]}: ours (epoch, lf, batches, epochs, stop) {o} vs reference {r}")
        print(f"time {name}: {len(ref)} epochs, per epoch (lf, batches, epochs after, stop) equal: "
              f"{[(r[1], r[2], r[3], r[4]) for r in ref]}")


# ---- fraction and single_cls --------------------------------------------------------------------------

def reference_train_images(img_dir, fraction, single_cls):
    from ultralytics.data.dataset import YOLODataset

    # The label cache is keyed by the files only: one written without single_cls would answer for it.
    for cache in (img_dir.parents[1] / "labels").glob("*.cache"):
        cache.unlink()

    ds = YOLODataset(img_path=str(img_dir), imgsz=64, augment=False, data={"names": {i: str(i) for i in range(NC)},
                     "nc": NC, "channels": 3}, task="segment", fraction=fraction, single_cls=single_cls)
    return [(str(Path(f).resolve()), [int(c) for c in lb["cls"].flatten()]) for f, lb in zip(ds.im_files, ds.labels)]


def lucid_train_images(data, fraction, single_cls):
    out = run([TOOL, "index", data, fraction, single_cls])
    names, images = None, []
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "names":
            names = parts[1:]
        else:
            images.append((parts[1], [int(c) for c in parts[2:]]))
    return names, images


def check_fraction_single_cls(tmp):
    root = tmp / "frac"
    classes = [0, 1, 2, 0, 7, 1, 2, 0, 1, 2, 0, 1, 2]  # 7: beyond nc, a usable class only with single_cls
    data = make_dataset(root, [(48 + 2 * i, 64) for i in range(13)], classes)
    (root / "images" / "train" / "05.jpg").write_bytes(b"not an image")  # corrupt: listed, then dropped
    from ultralytics.data import utils as data_utils

    counts = hasattr(data_utils, "get_split_fraction")  # 8.4.190: image counts > 1 and max(1, round(...))
    cases = [(0.5, False), (0.3, True), (1.0, False), (1.0, True)] + ([(4, False), (9, True)] if counts else [])
    for fraction, single_cls in cases:
        ref = reference_train_images(root / "images" / "train", fraction, single_cls)
        names, ours = lucid_train_images(data, str(fraction), str(single_cls))
        check(ours == ref, f"fraction={fraction} single_cls={single_cls}: ours {ours} vs reference {ref}")
        check(names == (["item"] if single_cls else [str(i) for i in range(NC)]), f"single_cls={single_cls}: names {names}")
        print(f"fraction={fraction} single_cls={single_cls}: {len(ref)} images and their classes equal")


# ---- rect ------------------------------------------------------------------------------------------------

def check_rect(tmp):
    from ultralytics.cfg import get_cfg
    from ultralytics.data.build import build_yolo_dataset

    root = tmp / "rect"
    # distinct aspect ratios, portrait and landscape, so that the order is the reference's own
    sizes = [(64, 40), (40, 64), (50, 64), (64, 50), (64, 64), (30, 64), (64, 33), (58, 64), (64, 21), (45, 64), (36, 64)]
    data = make_dataset(root, sizes)
    for imgsz, batch in ((64, 4), (96, 3)):
        cfg = get_cfg(overrides={"rect": True, "imgsz": imgsz, "task": "segment", "cache": False})
        ds = build_yolo_dataset(cfg, str(root / "images" / "train"), batch, {"names": {i: str(i) for i in range(NC)},
                                "nc": NC, "channels": 3}, mode="train", stride=32)
        ref = []
        for k in range(int(ds.batch[-1]) + 1):
            files = [str(Path(ds.im_files[i]).resolve()) for i in range(len(ds.im_files)) if ds.batch[i] == k]
            ref.append((int(ds.batch_shapes[k][0]), int(ds.batch_shapes[k][1]), files))
        ours = []
        for line in run([TOOL, "rect", data, imgsz, batch]).splitlines():
            parts = line.split()
            if parts and parts[0] == "batch":
                ours.append((int(parts[1]), int(parts[2]), parts[3:]))
        check(ours == ref, f"rect imgsz={imgsz} batch={batch}: ours {ours} vs reference {ref}")
        print(f"rect imgsz={imgsz} batch={batch}: {len(ref)} batches, order and shapes equal: {[r[:2] for r in ref]}")


# ---- AutoBatch -------------------------------------------------------------------------------------------

def reference_autobatch(total, available, fraction, dataset_size, gibs):
    import torch
    from ultralytics.utils import autobatch as ab

    gb = 1 << 30
    reserved = 0.5

    class Accelerator:
        def get_device_properties(self, device):
            return types.SimpleNamespace(total_memory=total * gb, name="fake")

        def memory_reserved(self, device):
            return reserved * gb

        def mem_get_info(self, device):
            return ((available - reserved) * gb, total * gb)

        def empty_cache(self):
            pass

    def profile_ops(img, model, n=1, device=None, max_num_obj=0):
        return [None if g is None else [0, 0, g, 0, 0, (), ()] for g in gibs[: len(img)]]

    class Model:
        yaml = {"channels": 3}

        def parameters(self):
            return iter([types.SimpleNamespace(device=torch.device("cuda", 0))])

    saved = ab.get_torch_device_backend, ab.profile_ops
    ab.get_torch_device_backend, ab.profile_ops = (lambda d: Accelerator()), profile_ops
    try:
        return ab.autobatch(Model(), imgsz=32, fraction=fraction, dataset_size=dataset_size)
    finally:
        ab.get_torch_device_backend, ab.profile_ops = saved


def check_autobatch():
    cases = [
        (24.0, 20.0, 0.6, 0, [0.9, 1.3, 2.1, 3.7, 6.9, 13.3, None]),    # linear, a failure at 64
        (80.0, 78.0, 0.6, 0, [1.1, 1.6, 2.6, 4.6, 8.6, 16.6, 32.6]),    # the line reaches past 64
        (80.0, 78.0, 0.9, 100, [1.1, 1.6, 2.6, 4.6, 8.6, 16.6, 32.6]),  # capped by the dataset
        (12.0, 11.0, 0.6, 0, [0.5, 0.6, 0.6, 1.2, 2.0]),                 # a non-increasing point dropped
        (12.0, 11.0, 0.3, 0, [0.5, None, 1.4, None, None]),              # failures between successes
        (12.0, 11.0, 0.6, 3, [0.7, 1.0, 1.5]),                           # small dataset: fewer probes
        (24.0, 20.0, 0.6, 0, [None, 30.0, 2.0, 3.0, 5.0, 9.0, 17.0]),   # over the total memory dropped
        (24.0, 20.0, 0.6, 0, [4.0, None, None, None, None, None, None]),  # one usable point
    ]
    for total, available, fraction, dataset_size, gibs in cases:
        ref = reference_autobatch(total, available, fraction, dataset_size, gibs)
        args = ["none" if g is None else repr(g) for g in gibs]
        ours = int(run([TOOL, "autobatch", total, available, fraction, dataset_size, *args]).strip())
        check(ours == ref, f"autobatch {total}G total {available}G available fraction {fraction} {gibs}: ours {ours} vs reference {ref}")
        print(f"autobatch {total}G/{available}G fraction={fraction} dataset={dataset_size}: batch {ref} both")


def reference_version():
    import ultralytics

    return tuple(int(x) for x in ultralytics.__version__.split(".")[:3])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if reference_version() >= (8, 4, 190):
            check_autobatch()
        else:  # lucid follows 8.4.190's rule (probe ceiling, clamp, no usable point an error)
            print(f"autobatch: reference {reference_version()} predates the 8.4.190 rule lucid follows; not compared")
        check_fraction_single_cls(tmp)
        check_rect(tmp)
        check_time(tmp)
    if FAILURES:
        sys.exit("\n".join(FAILURES))


if __name__ == "__main__":
    main()
