#!/usr/bin/env python3
"""Oracle: `lucid coco-eval` against pycocotools' COCOeval.

Ground truth: coco128-seg (YOLO polygon labels) turned into a COCO instances file with the real
COCO category ids, a few crowd regions (uncompressed RLE) and a few two-part polygons. Predictions:
every ground truth shifted, rescaled and jittered, some dropped, some duplicated, some with the
wrong class, false positives (also on the unlabelled images and in categories without ground
truth), scores over the whole range with many ties, one image with more than 100 detections.
Segmentations are written as polygons, compressed and uncompressed RLE.

Three results files (box + segmentation; compressed RLE only; box only) are evaluated with
iou=segm and iou=bbox; all 12 numbers of each must agree within 1e-4, and the text output must be
pycocotools' summarize() lines. With the metrics oracle tool built, RLE strings, areas, boxes and
IoUs of individual masks are compared exactly as well.

Skips (exit 0) when ../shared/data/coco128-seg is absent relative to the source tree.
"""
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

SRC = os.environ.get("LUCID_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("LUCID_BUILD_DIR", os.path.join(SRC, "build"))
DATA = os.path.join(SRC, "..", "shared", "data", "coco128-seg")
LUCID = os.path.join(BUILD, "lucid")
TOOL = os.path.join(BUILD, "tests", "metrics_oracle_tool")
TOL = 1e-4

COCO_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
            33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
            60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]


def uncompressed_rle(mask):
    flat = np.asfortranarray(mask).reshape(-1, order="F")
    counts, prev, run = [], 0, 0
    for v in flat:
        if v != prev:
            counts.append(run)
            run, prev = 0, v
        run += 1
    counts.append(run)
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def poly_bbox(polys):
    xs = [x for p in polys for x in p[0::2]]
    ys = [y for p in polys for y in p[1::2]]
    return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]


def build_ground_truth(rng):
    images, anns = [], []
    img_dir, lbl_dir = os.path.join(DATA, "images", "train2017"), os.path.join(DATA, "labels", "train2017")
    for name in sorted(os.listdir(img_dir)):
        stem = os.path.splitext(name)[0]
        with Image.open(os.path.join(img_dir, name)) as im:
            w, h = im.size
        img_id = int(stem)
        images.append({"id": img_id, "file_name": name, "height": h, "width": w})
        label = os.path.join(lbl_dir, stem + ".txt")
        if not os.path.exists(label):
            continue
        for line in open(label).read().splitlines():
            v = line.split()
            if len(v) < 7:
                continue
            cls = int(v[0])
            xy = [float(t) for t in v[1:]]
            poly = [round(c * (w if i % 2 == 0 else h), 2) for i, c in enumerate(xy)]
            polys = [poly]
            if rng.random() < 0.05:  # a second part: a small triangle near the first vertex
                x0, y0 = poly[0], poly[1]
                polys.append([x0 + 5, y0 + 5, x0 + 25, y0 + 8, x0 + 12, y0 + 30])
            rle = mask_utils.merge(mask_utils.frPyObjects(polys, h, w))
            ann = {"id": len(anns) + 1, "image_id": img_id, "category_id": COCO_IDS[cls],
                   "area": float(mask_utils.area(rle)), "bbox": poly_bbox(polys), "iscrowd": 0, "segmentation": polys}
            if rng.random() < 0.06:  # crowd region as uncompressed RLE
                ann["iscrowd"] = 1
                ann["segmentation"] = uncompressed_rle(mask_utils.decode(rle))
            anns.append(ann)
    cats = [{"id": i, "name": "c%d" % i, "supercategory": "x"} for i in COCO_IDS]
    return {"images": images, "annotations": anns, "categories": cats}


def perturb(polys, rng, w, h):
    xs = [x for p in polys for x in p[0::2]]
    ys = [y for p in polys for y in p[1::2]]
    cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    bw, bh = max(xs) - min(xs) + 1, max(ys) - min(ys) + 1
    s = rng.uniform(0.75, 1.25)
    dx, dy = rng.gauss(0, 0.08) * bw, rng.gauss(0, 0.08) * bh
    out = []
    for p in polys:
        q = []
        for i in range(0, len(p) - 1, 2):
            q.append((p[i] - cx) * s + cx + dx + rng.gauss(0, 1.0))
            q.append((p[i + 1] - cy) * s + cy + dy + rng.gauss(0, 1.0))
        out.append(q)
    return out


def random_polygon(rng, w, h):
    cx, cy = rng.uniform(0, w), rng.uniform(0, h)
    r = rng.choice([3, 8, 20, 40, 90, 160])
    n = rng.randint(3, 12)
    pts = []
    for i in range(n):
        a = 2 * np.pi * i / n + rng.uniform(0, 0.3)
        rr = r * rng.uniform(0.5, 1.0)
        pts += [cx + rr * np.cos(a), cy + rr * np.sin(a)]
    return [pts]


def score(rng):
    kind = rng.random()
    if kind < 0.4:
        return round(rng.random(), 1)  # heavy ties
    if kind < 0.5:
        return rng.choice([0.0, 1.0, 0.5])
    return rng.random()


def segmentation_form(polys, h, w, rng):
    kind = rng.random()
    if kind < 0.4:
        return polys
    rle = mask_utils.merge(mask_utils.frPyObjects(polys, h, w))
    if kind < 0.85:
        return {"size": rle["size"], "counts": rle["counts"].decode()}
    return uncompressed_rle(mask_utils.decode(rle))


def build_detections(gt, rng):
    sizes = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
    dets = []

    def add(img_id, cat, polys):
        h, w = sizes[img_id]
        bb = poly_bbox(polys)
        if rng.random() < 0.3:
            bb = [bb[0] + rng.gauss(0, 2), bb[1] + rng.gauss(0, 2), bb[2] * rng.uniform(0.9, 1.1), bb[3] * rng.uniform(0.9, 1.1)]
        dets.append({"image_id": img_id, "category_id": cat, "bbox": [round(v, 3) for v in bb], "score": score(rng),
                     "_polys": polys})

    for ann in gt["annotations"]:
        if rng.random() < 0.15:
            continue  # missed
        h, w = sizes[ann["image_id"]]
        seg = ann["segmentation"]
        if isinstance(seg, dict):  # crowd: detect its box region
            x, y, bw, bh = ann["bbox"]
            polys = [[x, y, x + bw, y, x + bw, y + bh, x, y + bh]]
        else:
            polys = seg
        for _ in range(2 if rng.random() < 0.12 else 1):
            cat = ann["category_id"] if rng.random() < 0.9 else rng.choice(COCO_IDS)
            add(ann["image_id"], cat, perturb(polys, rng, w, h))
    present = sorted({a["category_id"] for a in gt["annotations"]})
    for im in gt["images"]:
        h, w = im["height"], im["width"]
        for _ in range(rng.randint(0, 4)):
            cat = rng.choice(present) if rng.random() < 0.7 else rng.choice(COCO_IDS)
            add(im["id"], cat, random_polygon(rng, w, h))
    crowded = gt["images"][3]["id"]  # more than maxDets=100 detections of one category
    h, w = sizes[crowded]
    cat = next((a["category_id"] for a in gt["annotations"] if a["image_id"] == crowded), COCO_IDS[0])
    for _ in range(130):
        add(crowded, cat, random_polygon(rng, w, h))
    rng.shuffle(dets)
    return dets


def write_results(dets, gt, rng, path, kind):
    sizes = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
    out = []
    for d in dets:
        h, w = sizes[d["image_id"]]
        e = {"image_id": d["image_id"], "category_id": d["category_id"], "score": d["score"]}
        if kind == "full":
            e["bbox"] = d["bbox"]
            e["segmentation"] = segmentation_form(d["_polys"], h, w, rng)
        elif kind == "rle":
            rle = mask_utils.merge(mask_utils.frPyObjects(d["_polys"], h, w))
            e["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode()}
        else:
            e["bbox"] = d["bbox"]
        out.append(e)
    with open(path, "w") as f:
        json.dump(out, f)


def reference(gt_path, dt_path, iou):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        gt = COCO(gt_path)
        dt = gt.loadRes(dt_path)
        ev = COCOeval(gt, dt, iou)
        ev.evaluate()
        ev.accumulate()
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        ev.summarize()
    return list(ev.stats), text.getvalue()


def lucid(gt_path, dt_path, iou, fmt):
    r = subprocess.run([LUCID, "coco-eval", "gt=" + gt_path, "dt=" + dt_path, "iou=" + iou, "format=" + fmt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("lucid coco-eval failed (%d): %s" % (r.returncode, r.stderr))
    return r.stdout


def check_rle_tool(gt, rng, tmp):
    """Exact RLE agreement for single masks through the metrics oracle tool."""
    if not os.path.exists(TOOL):
        print("metrics_oracle_tool not built; skipping the per-mask RLE comparison")
        return 0
    sizes = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
    cases = []
    for ann in gt["annotations"][:400]:
        h, w = sizes[ann["image_id"]]
        seg = ann["segmentation"]
        polys = seg if isinstance(seg, list) else random_polygon(rng, w, h)
        cases.append({"h": h, "w": w, "polys": polys})
        cases.append({"h": h, "w": w, "polys": perturb(polys, rng, w, h)})
    for _ in range(200):  # odd shapes: tiny, degenerate, outside the image, repeated vertices
        h, w = rng.randint(1, 60), rng.randint(1, 60)
        n = rng.randint(3, 7)
        p = [rng.uniform(-10, w + 10) if i % 2 == 0 else rng.uniform(-10, h + 10) for i in range(2 * n)]
        if rng.random() < 0.3:
            p = p[:4] + p[2:4] + p[4:]
        if rng.random() < 0.3:
            p = [round(v) for v in p]
        cases.append({"h": h, "w": w, "polys": [p]})
    pairs = []
    for i in range(0, len(cases) - 1, 2):
        pairs.append({"dt": i, "gt": i + 1, "crowd": bool(rng.random() < 0.3)})
    inp = os.path.join(tmp, "rle_cases.json")
    with open(inp, "w") as f:
        json.dump({"masks": cases, "pairs": pairs}, f)
    r = subprocess.run([TOOL, inp], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("metrics_oracle_tool failed: " + r.stderr)
    got = json.loads(r.stdout)
    fails = 0
    rles = []
    for i, c in enumerate(cases):
        rle = mask_utils.merge(mask_utils.frPyObjects(c["polys"], c["h"], c["w"]))
        rles.append(rle)
        want = (rle["counts"].decode(), int(mask_utils.area(rle)), [float(v) for v in mask_utils.toBbox(rle)])
        g = got["masks"][i]
        have = (g["counts"], g["area"], g["bbox"])
        if want != have:
            fails += 1
            if fails < 5:
                print("RLE mismatch for case %d: %s\n  pycocotools %s\n  lucid       %s" % (i, c, want, have))
        if g["roundtrip"] != g["counts"] or g["decoded_area"] != g["area"]:
            fails += 1
            print("RLE string/decode round trip failed for case %d" % i)
    for j, p in enumerate(pairs):
        want = float(mask_utils.iou([rles[p["dt"]]], [rles[p["gt"]]], [int(p["crowd"])])[0][0])
        have = got["ious"][j]
        if want != have:
            fails += 1
            if fails < 10:
                print("IoU mismatch for pair %s: pycocotools %r lucid %r" % (p, want, have))
    print("per-mask RLE comparison: %d masks, %d IoU pairs, %d mismatches" % (len(cases), len(pairs), fails))
    return fails


def main():
    if not os.path.isdir(DATA):
        print("SKIP: %s not found" % DATA)
        return 0
    if not os.path.exists(LUCID):
        print("lucid binary not found at %s (build it first)" % LUCID)
        return 1
    rng = random.Random(20240611)
    with tempfile.TemporaryDirectory() as tmp:
        gt = build_ground_truth(rng)
        gt_path = os.path.join(tmp, "gt.json")
        with open(gt_path, "w") as f:
            json.dump(gt, f)
        dets = build_detections(gt, rng)
        print("ground truth: %d images, %d instances (%d crowd); %d detections" % (
            len(gt["images"]), len(gt["annotations"]), sum(a["iscrowd"] for a in gt["annotations"]), len(dets)))
        failures = check_rle_tool(gt, rng, tmp)
        for kind, ious in (("full", ("segm", "bbox")), ("rle", ("segm", "bbox")), ("box", ("segm", "bbox"))):
            dt_path = os.path.join(tmp, "dt_%s.json" % kind)
            write_results(dets, gt, rng, dt_path, kind)
            for iou in ious:
                want, want_text = reference(gt_path, dt_path, iou)
                got = json.loads(lucid(gt_path, dt_path, iou, "json"))["stats"]
                diff = max(abs(a - b) for a, b in zip(want, got))
                status = "ok" if diff <= TOL and len(got) == 12 else "FAIL"
                print("%-4s results, iou=%s: max |diff| %.2e %s" % (kind, iou, diff, status))
                print("  pycocotools:", " ".join("%.6f" % v for v in want))
                print("  lucid:      ", " ".join("%.6f" % v for v in got))
                if status != "ok":
                    failures += 1
                if kind == "full":
                    text = lucid(gt_path, dt_path, iou, "text")
                    if text != want_text:
                        failures += 1
                        print("text output differs:\n--- pycocotools\n%s--- lucid\n%s" % (want_text, text))
    print("FAILED" if failures else "PASSED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
