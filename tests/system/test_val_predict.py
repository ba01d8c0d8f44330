"""`lucid val`, `lucid predict`, the plots and the run report, end to end on a tiny training run on
the synthetic dataset (CPU):
- the training run's folder holds results.png, the Box/Mask curves, both confusion matrices,
  train_batch0..2.jpg, val_batch0_labels/pred.jpg (valid PNG/JPEG files) and report.html, whose
  links all name files that exist;
- `lucid val` on weights/best.safetensors prints the same table (all and per-class rows) as the
  training's final validation of those weights (both through the one-to-many head and NMS, the
  reference's nms=None); nms=False (the one-to-one head) gives another, end2end=True the same as
  nms=False with a deprecation warning;
- save_json on COCO data writes the dataset's own image and category ids, RLE masks of the image
  size and boxes in the same original pixels (each mask inside its box), and `lucid coco-eval`
  accepts the file;
- the synthetic set's YAML form and its COCO form, validated with the same weights, give the same
  table;
- `lucid predict` writes drawn images that differ from the source inside a detection, YOLO txt lines
  (class, normalised outline, score with save_conf) and a COCO-style JSON; retina_masks masks have
  the image size; bad sources, unreadable images and unknown options fail with one line naming them.
Plot checks are skipped (reported) when the build has no cairo and the run says so."""
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, failures  # noqa: E402
from lucid_runs import lucid as run  # noqa: E402

# imgsz left to its default (160 for the synthetic dataset): lucid val must resolve it as train did.
TRAIN = ["epochs=2", "batch=8", "workers=2", "device=cpu", "close_mosaic=1"]
PLOTS = ["results.png", "BoxPR_curve.png", "BoxP_curve.png", "BoxR_curve.png", "BoxF1_curve.png",
         "MaskPR_curve.png", "MaskP_curve.png", "MaskR_curve.png", "MaskF1_curve.png", "confusion_matrix.png",
         "confusion_matrix_normalized.png", "train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg",
         "val_batch0_labels.jpg", "val_batch0_pred.jpg"]


def table_rows(text):
    """The validator's table rows (all and per class) after the last header."""
    lines = text.splitlines()
    start = max(i for i, l in enumerate(lines) if l.split()[:3] == ["Class", "Images", "Instances"])
    rows = []
    for l in lines[start + 1:]:
        if len(l.split()) != 11 or l.startswith("Speed:"):
            break
        rows.append(l)
    return rows


def report_links(html_path):
    html = html_path.read_text()
    return set(re.findall(r'(?:src|href)="([^"]+)"', html))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        tr = run(["train", *TRAIN, f"project={project}", "name=train"], env)
        run_dir = project / "train"
        best = run_dir / "weights" / "best.safetensors"
        plots = "plots skipped: built without cairo" not in tr.stderr
        if plots:
            for name in PLOTS:
                p = run_dir / name
                ok = p.exists()
                if ok:
                    with Image.open(p) as im:
                        im.load()
                        ok = im.format == ("PNG" if name.endswith(".png") else "JPEG") and min(im.size) > 32
                check(ok, f"train run: {name} is a valid image")
        else:
            print("SKIP plot files: the build has no cairo (the run printed the warning)")
        html = run_dir / "report.html"
        check(html.exists(), "train run: report.html written")
        links = report_links(html)
        check(all((run_dir / l).exists() and ":" not in l for l in links), f"report links exist and are relative ({len(links)})")
        if plots:
            check(set(PLOTS) <= links, "report shows every plot")
        check({"results.csv", "args.yaml"} <= links, "report links results.csv and args.yaml")

        # Standalone val on the same weights with the same batch size as the training's validation.
        final = tr.stdout[tr.stdout.index("Validating "):]
        va = run(["val", f"model={best}", "batch=16", "device=cpu", f"project={project}", "name=val"], env)
        a, b = table_rows(final), table_rows(va.stdout)
        print("\n".join(b))
        check(len(a) == 4 and a == b, "lucid val prints the training's final validation table (all + 3 classes)")
        check(any(float(v) > 0 for v in b[0].split()[3:]), "the table has nonzero metrics (the comparison means something)")
        check("Speed:" in va.stdout, "lucid val prints the speed line")
        check((project / "val" / "report.html").exists(), "lucid val writes report.html")
        # nms=False: the end-to-end model's one-to-one head; the deprecated end2end=True is the same,
        # with the reference's warning naming both.
        o2o = run(["val", f"model={best}", "batch=16", "device=cpu", "plots=False", "nms=False", f"project={project}",
                   "name=val-o2o"], env)
        dep = run(["val", f"model={best}", "batch=16", "device=cpu", "plots=False", "end2end=True", f"project={project}",
                   "name=val-e2e"], env)
        check(table_rows(dep.stdout) == table_rows(o2o.stdout), "end2end=True validates as nms=False")
        check("'end2end=True' is deprecated" in dep.stderr and "Use 'nms=False' instead" in dep.stderr,
              "end2end= warns, naming nms=")
        check(table_rows(o2o.stdout) != b, "nms=False (one-to-one head) gives another table than the default (NMS)")
        if plots:
            check((project / "val" / "MaskPR_curve.png").exists() and (project / "val" / "val_batch0_pred.jpg").exists(),
                  "lucid val plots=True writes curves and batch images")

        # save_json on COCO data whose category ids are not class + 1.
        synth = tmp / "cache" / "synth-v1"
        gt = json.loads((synth / "annotations" / "instances_val.json").read_text())
        remap = {c["id"]: c["id"] + 10 for c in gt["categories"]}
        for c in gt["categories"]:
            c["id"] = remap[c["id"]]
        for an in gt["annotations"]:
            an["category_id"] = remap[an["category_id"]]
        (tmp / "val.json").write_text(json.dumps(gt))
        (tmp / "coco.yaml").write_text(f"train: {{json: {tmp / 'val.json'}, images: {synth / 'images' / 'val'}}}\n"
                                       f"val: {{json: {tmp / 'val.json'}, images: {synth / 'images' / 'val'}}}\n")
        run(["val", f"model={best}", f"data={tmp / 'coco.yaml'}", "save_json=True", "plots=False", "device=cpu",
             f"project={project}", "name=valjson"], env)
        preds = json.loads((project / "valjson" / "predictions.json").read_text())
        sizes = {im["id"]: (im["height"], im["width"]) for im in gt["images"]}
        cats = {c["id"] for c in gt["categories"]}
        check(len(preds) > 0, f"predictions.json has {len(preds)} results")
        check(all(p["image_id"] in sizes for p in preds), "image ids are the COCO file's ids")
        check(all(p["category_id"] in cats for p in preds), "category ids are the COCO file's (11..13)")
        check(all(tuple(p["segmentation"]["size"]) == sizes[p["image_id"]] and len(p["bbox"]) == 4 for p in preds),
              "RLE masks have the image size; bbox is xywh")
        ce = run(["coco-eval", f"gt={tmp / 'val.json'}", f"dt={project / 'valjson' / 'predictions.json'}", "iou=segm"], env)
        check("Average Precision" in ce.stdout, "lucid coco-eval reads the results file")
        # Boxes and masks of the results file are both in original pixels (the synthetic images are
        # larger than imgsz): each non-empty mask lies inside its box, up to 2 px.
        from pycocotools import mask as mask_utils
        inside = []
        for p in preds:
            if mask_utils.area(p["segmentation"]) == 0:
                continue
            mx, my, mw, mh = mask_utils.toBbox(p["segmentation"]).tolist()
            x, y, w, h = p["bbox"]
            inside.append(mx >= x - 2 and my >= y - 2 and mx + mw <= x + w + 2 and my + mh <= y + h + 2)
        check(len(inside) > 0 and sum(inside) >= 0.95 * len(inside),
              f"results-file masks lie inside their boxes ({sum(inside)} of {len(inside)})")

        # The same data in two forms: the synthetic set's YAML and COCO forms give the same table.
        forms = {}
        for form in ("data.yaml", "coco.yaml"):
            v = run(["val", f"model={best}", f"data={synth / form}", "plots=False", "device=cpu", f"project={project}",
                     f"name=form-{form}"], env)
            forms[form] = table_rows(v.stdout)
        check(forms["data.yaml"] == forms["coco.yaml"] and len(forms["data.yaml"]) == 4,
              f"YAML and COCO forms of the synthetic set validate alike: {forms['data.yaml'][:1]} / {forms['coco.yaml'][:1]}")

        # Predict.
        src = tmp / "src"
        shutil.copytree(synth / "images" / "val", src)
        pr = run(["predict", f"model={best}", f"source={src}", "conf=0.001", "imgsz=128", "device=cpu",
                  "save_txt=True", "save_conf=True", "save_json=True", f"project={project}", "name=predict"], env)
        out = project / "predict"
        images = sorted(src.glob("*.jpg"))
        check(len(re.findall(r"^image \d+/\d+ ", pr.stdout, re.M)) == len(images), "one log line per image")
        txts = sorted((out / "labels").glob("*.txt"))
        lines = [l.split() for t in txts for l in t.read_text().splitlines()]
        check(len(lines) > 0, f"save_txt wrote {len(lines)} instances")
        ok = all(int(l[0]) in (0, 1, 2) and len(l) % 2 == 0 and len(l) >= 4
                 and all(0 <= float(v) <= 1 for v in l[1:]) for l in lines)
        check(ok, "txt lines: class, normalised x y pairs, score")
        pj = json.loads((out / "predictions.json").read_text())
        check(len(pj) == len(lines), "predictions.json has one entry per txt line")
        if plots and pj:
            p = max(pj, key=lambda r: r["score"])
            name = p["file_name"]
            a = np.asarray(Image.open(src / name).convert("RGB"), dtype=np.int32)
            b = np.asarray(Image.open(out / name).convert("RGB"), dtype=np.int32)
            x, y, w, h = (int(v) for v in p["bbox"])
            box = np.s_[max(y - 2, 0):y + h + 3, max(x - 2, 0):x + w + 3]
            check(a.shape == b.shape and np.abs(a[box] - b[box]).sum() > 0,
                  f"drawn image {name} differs from the source at its detection")
        rr = run(["predict", f"model={best}", f"source={images[0]}", "conf=0.001", "imgsz=128", "device=cpu",
                  "retina_masks=True", "save_json=True", "save=False", f"project={project}", "name=retina"], env)
        rj = json.loads((project / "retina" / "predictions.json").read_text())
        with Image.open(images[0]) as im:
            size = [im.height, im.width]
        check(all(r["segmentation"]["size"] == size for r in rj), "retina_masks: masks at the image size")

        run(["predict", f"model={best}", f"source={src}", "conf=0.001", "imgsz=128", "device=cpu", "classes=1",
             "save=False", "save_json=True", f"project={project}", "name=classes"], env)
        cj = json.loads((project / "classes" / "predictions.json").read_text())
        check(len(cj) > 0 and all(r["category_id"] == 2 for r in cj), f"classes=1 keeps only class 1 ({len(cj)} results)")

        # Errors: one line naming the file or option.
        e = run(["predict", f"model={best}", f"source={tmp / 'nope'}"], env, expect=1)
        check("nope" in e.stderr and len(e.stderr.strip().splitlines()) == 1, f"missing source: {e.stderr.strip()}")
        (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
        e = run(["predict", f"model={best}", f"source={src / 'broken.jpg'}", "device=cpu",
                 f"project={project}", "name=bad"], env, expect=1)
        check("broken.jpg" in e.stderr and len(e.stderr.strip().splitlines()) == 1, f"unreadable image: {e.stderr.strip()}")
        e = run(["val", f"model={best}", "colour=red"], env, expect=1)
        check("colour" in e.stderr, f"unknown option: {e.stderr.strip()}")
        e = run(["val", f"model={best}", "split=train2"], env, expect=1)
        check("split" in e.stderr, f"bad value: {e.stderr.strip()}")
    if failures:
        sys.exit(f"{len(failures)} checks failed: {failures}")


if __name__ == "__main__":
    main()
