#!/usr/bin/env python3
"""Benchmark: `lucid coco-eval` against pycocotools on a synthetic COCO instance segmentation set.

Generates N images (default 5,000) with about 7 ground-truth instances each (random polygons of all
sizes in 80 categories, 1% crowd regions as uncompressed RLE) and detections as a model would write
them (perturbed masks as compressed RLE with boxes and scores; misses, duplicates, false
positives). Then, alternating, several runs of
  - lucid:        the whole `lucid coco-eval gt=... dt=... iou=segm format=json` process (reading
                  both JSON files, evaluation, summary);
  - pycocotools:  COCO(gt) + loadRes(dt) + evaluate() + accumulate() + summarize() in this process,
                  timed as a whole and for the evaluate+accumulate+summarize part alone.
Prints median (min-max) seconds per tool, the speed-up ratios and the largest difference of the 12
numbers between the two.

usage: python bench/coco_eval_bench.py [--images 5000] [--runs 3] [--lucid build/lucid] [--iou segm]
"""
import argparse
import contextlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COCO_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
            33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
            60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]
SIZES = [(480, 640), (640, 480), (427, 640), (640, 427), (512, 512), (375, 500)]


def polygon(rng, cx, cy, r):
    n = rng.randint(8, 24)
    pts = []
    for i in range(n):
        a = 2 * np.pi * i / n
        rr = r * rng.uniform(0.6, 1.0)
        pts += [round(cx + rr * np.cos(a), 2), round(cy + 0.8 * rr * np.sin(a), 2)]
    return pts


def uncompressed(rle):
    m = mask_utils.decode(rle).reshape(-1, order="F")
    change = np.flatnonzero(np.diff(np.concatenate([[0], m, [1 - m[-1]]])))
    counts = np.diff(np.concatenate([[0], change])).tolist()
    return {"size": rle["size"], "counts": counts}


def generate(n_images, per_image, seed):
    rng = random.Random(seed)
    images, anns, dets = [], [], []
    for i in range(n_images):
        h, w = rng.choice(SIZES)
        img_id = 1000000 + 7 * i
        images.append({"id": img_id, "file_name": "%d.jpg" % img_id, "height": h, "width": w})
        n = max(0, int(rng.gauss(per_image, 2.5)))
        cats = [rng.choice(COCO_IDS) for _ in range(3)]
        for _ in range(n):
            r = rng.choice([6, 10, 16, 24, 40, 70, 120])
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            poly = polygon(rng, cx, cy, r)
            rle = mask_utils.frPyObjects([poly], h, w)[0]
            cat = rng.choice(cats)
            bb = [float(v) for v in mask_utils.toBbox(rle)]
            ann = {"id": len(anns) + 1, "image_id": img_id, "category_id": cat, "area": float(mask_utils.area(rle)),
                   "bbox": bb, "iscrowd": 0, "segmentation": [poly]}
            if rng.random() < 0.01:
                ann["iscrowd"] = 1
                ann["segmentation"] = uncompressed(rle)
            anns.append(ann)
            if rng.random() < 0.12:
                continue
            for _ in range(2 if rng.random() < 0.1 else 1):
                s = rng.uniform(0.8, 1.2)
                q = polygon(rng, cx + rng.gauss(0, 0.1 * r), cy + rng.gauss(0, 0.1 * r), r * s)
                dets.append((img_id, cat if rng.random() < 0.9 else rng.choice(COCO_IDS), q, h, w))
        for _ in range(rng.randint(0, 3)):
            dets.append((img_id, rng.choice(cats), polygon(rng, rng.uniform(0, w), rng.uniform(0, h),
                                                            rng.choice([8, 20, 50])), h, w))
    results = []
    for img_id, cat, q, h, w in dets:
        rle = mask_utils.frPyObjects([q], h, w)[0]
        results.append({"image_id": img_id, "category_id": cat, "bbox": [round(float(v), 2) for v in mask_utils.toBbox(rle)],
                        "score": round(rng.random(), 5), "segmentation": {"size": [h, w], "counts": rle["counts"].decode()}})
    cats = [{"id": c, "name": "class%d" % c, "supercategory": "thing"} for c in COCO_IDS]
    return {"images": images, "annotations": anns, "categories": cats}, results


def run_lucid(lucid, gt, dt, iou, threads):
    t0 = time.perf_counter()
    r = subprocess.run([lucid, "coco-eval", "gt=" + gt, "dt=" + dt, "iou=" + iou, "format=json", "threads=%d" % threads],
                       capture_output=True, text=True)
    t = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("lucid coco-eval failed: " + r.stderr)
    return t, json.loads(r.stdout)["stats"]


def run_pycocotools(gt, dt, iou):
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        t0 = time.perf_counter()
        g = COCO(gt)
        d = g.loadRes(dt)
        t1 = time.perf_counter()
        e = COCOeval(g, d, iou)
        e.evaluate()
        e.accumulate()
        e.summarize()
        t2 = time.perf_counter()
    return t2 - t0, t2 - t1, list(e.stats)


def fmt(xs):
    return "%.3f s (%.3f-%.3f)" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--per-image", type=float, default=7)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iou", default="segm", choices=["segm", "bbox"])
    ap.add_argument("--threads", type=int, default=0, help="lucid threads (0: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lucid", default=os.path.join(os.environ.get("LUCID_BUILD_DIR", os.path.join(ROOT, "build")), "lucid"))
    ap.add_argument("--keep", default="", help="write the generated files to this folder and keep them")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        os.makedirs(out, exist_ok=True)
        t0 = time.perf_counter()
        gt, results = generate(args.images, args.per_image, args.seed)
        gt_path, dt_path = os.path.join(out, "bench_gt.json"), os.path.join(out, "bench_dt.json")
        with open(gt_path, "w") as f:
            json.dump(gt, f)
        with open(dt_path, "w") as f:
            json.dump(results, f)
        print("synthetic set: %d images, %d instances (%d crowd), %d detections, %d categories; gt %.1f MB, dt %.1f MB "
              "(generated in %.1f s)" % (len(gt["images"]), len(gt["annotations"]),
                                         sum(a["iscrowd"] for a in gt["annotations"]), len(results),
                                         len(gt["categories"]), os.path.getsize(gt_path) / 1e6,
                                         os.path.getsize(dt_path) / 1e6, time.perf_counter() - t0))
        print("cpu cores: %d; iou=%s; %d runs each, alternating" % (os.cpu_count(), args.iou, args.runs))
        lucid_t, py_total, py_eval, diffs = [], [], [], []
        for i in range(args.runs):
            t, stats_l = run_lucid(args.lucid, gt_path, dt_path, args.iou, args.threads)
            lucid_t.append(t)
            total, ev, stats_p = run_pycocotools(gt_path, dt_path, args.iou)
            py_total.append(total)
            py_eval.append(ev)
            diffs.append(max(abs(a - b) for a, b in zip(stats_l, stats_p)))
            print("run %d: lucid %.3f s | pycocotools %.3f s (evaluate+accumulate+summarize %.3f s)" % (i + 1, t, total, ev))
        print("lucid coco-eval (whole process):                  " + fmt(lucid_t))
        print("pycocotools evaluate+accumulate+summarize:        " + fmt(py_eval))
        print("pycocotools incl. loading both JSON files:        " + fmt(py_total))
        ml = statistics.median(lucid_t)
        print("speed-up (median): %.1fx vs evaluate+accumulate+summarize, %.1fx vs pycocotools incl. loading"
              % (statistics.median(py_eval) / ml, statistics.median(py_total) / ml))
        print("largest difference of the 12 numbers: %.2e" % max(diffs))
        print("AP=%.4f AP50=%.4f AR100=%.4f" % (stats_l[0], stats_l[1], stats_l[8]))


if __name__ == "__main__":
    main()
