#!/usr/bin/env python3
"""The peer arm of the fit benchmarks: one Ultralytics training run with the settings lucid's
bench/fit_workload.sh uses (yolo26n-seg from scratch, 640 px, AMP, MuSGD, cache in RAM, mosaic
throughout, 1 warmup epoch, validation every epoch, plots off), in this fresh process.

  ultralytics_fit.py --data DATA.yaml --out DIR [--epochs 5] [--batch 4] [--workers 4] [--device 0] [--cache ram]

Prints one JSON line: the package version, the complete fit (model construction to the end of
model.train(), which includes the reference's final validation of best.pt), the whole process since
start, the steady step (median and range of the step intervals of the last epoch, from the
on_train_batch_end callback), each epoch's training time (its start to its last batch's end) with
the training images per second over it, and the peak allocated / reserved GPU memory.
"""
import argparse
import json
import statistics
import time

PROCESS_START = time.perf_counter()

import torch  # noqa: E402
import ultralytics  # noqa: E402
from ultralytics import YOLO  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--device", default="0")
    ap.add_argument("--name", default="fit")
    ap.add_argument("--cache", default="ram", help="ram, disk or False")
    a = ap.parse_args()

    stamps = {}  # epoch -> times of its batch ends
    starts, images = {}, {}  # epoch -> its start; training images per epoch

    def on_epoch_start(trainer):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        starts[trainer.epoch] = time.perf_counter()
        images[trainer.epoch] = len(trainer.train_loader.dataset)

    def on_batch_end(trainer):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        stamps.setdefault(trainer.epoch, []).append(time.perf_counter())

    start = time.perf_counter()
    model = YOLO("yolo26n-seg.yaml")
    model.add_callback("on_train_batch_end", on_batch_end)
    model.add_callback("on_train_epoch_start", on_epoch_start)
    model.train(data=a.data, epochs=a.epochs, batch=a.batch, imgsz=640, optimizer="MuSGD", amp=True, cache=False if a.cache == "False" else a.cache,
                workers=a.workers, close_mosaic=0, warmup_epochs=1, plots=False, device=a.device, seed=0,
                pretrained=False, project=a.out, name=a.name, exist_ok=True, verbose=False)
    fit = time.perf_counter() - start
    # Under DDP (--device 0,1) the reference trains in subprocesses, without this process's callback.
    last = stamps[max(stamps)] if stamps else []
    steps = [1000.0 * (t1 - t0) for t0, t1 in zip(last, last[1:])]
    cuda = torch.cuda.is_available()
    epochs = [{"epoch": e + 1, "epoch_s": round(stamps[e][-1] - starts[e], 3),
               "images_per_s": round(images[e] / (stamps[e][-1] - starts[e]), 1)}
              for e in sorted(starts) if stamps.get(e)]
    print(json.dumps({
        "ultralytics": ultralytics.__version__, "batch": a.batch, "epochs": a.epochs, "workers": a.workers,
        "complete_fit_s": round(fit, 3), "process_s": round(time.perf_counter() - PROCESS_START, 3),
        "steady_step_ms": {"median": round(statistics.median(steps), 2), "min": round(min(steps), 2),
                           "max": round(max(steps), 2), "steps": len(steps)} if steps else None,
        "epochs_timed": epochs,
        "peak_allocated_mib": round(torch.cuda.max_memory_allocated() / 2**20) if cuda else 0,
        "peak_reserved_mib": round(torch.cuda.max_memory_reserved() / 2**20) if cuda else 0,
    }), flush=True)


if __name__ == "__main__":
    main()
