"""Run by tests/oracle/test_results_objects_oracle.py with the installed lucid_yolo (no reference
package), in a folder holding weights.safetensors and a few images: predicts them, validates on them labelled by
their own detections, and writes what every method of the Results, Boxes, Masks, SegmentMetrics and
ConfusionMatrix objects returns (and model.info()) to objects.pkl, for the oracle to compare with
the reference's own objects built from the same arrays."""
import contextlib
import io
import pickle
import sys
from pathlib import Path

import numpy as np
import torch

from lucid_yolo import YOLO
from lucid_yolo.results import Masks


def arrays(v):
    return v.cpu().numpy() if isinstance(v, torch.Tensor) else v


def boxes_record(b):
    return {k: arrays(getattr(b, k)) for k in ("data", "xyxy", "xywh", "xyxyn", "xywhn", "conf", "cls")}


def frame_text(df):
    return None if df is None else df.write_json()


def to_df_or_none(obj, **kw):
    try:
        return obj.to_df(**kw)
    except ImportError as e:  # the oracle fails the test unless polars is missing in this venv
        return str(e)


def result_record(r, i, work):
    txt, txt_conf = work / f"labels_{i}.txt", work / f"labels_conf_{i}.txt"
    r.save_txt(txt)
    r.save_txt(txt_conf, save_conf=True)
    crops = work / f"crops_{i}"
    r.save_crop(crops, file_name=f"image_{i}")
    n = len(r)
    first, last = r[0], r[n - 1]
    on_numpy = r.numpy()
    half = r.to(torch.float16)
    df = to_df_or_none(r)
    return {
        "path": r.path, "orig_shape": r.orig_shape, "names": r.names, "len": n, "save_dir": r.save_dir,
        "orig_img": r.orig_img, "boxes": boxes_record(r.boxes), "masks": arrays(r.masks.data).astype(np.uint8),
        "xy": r.masks.xy, "xyn": r.masks.xyn, "summary": r.summary(), "summary_n": r.summary(normalize=True, decimals=3),
        "to_json": r.to_json(), "to_json_n": r.to_json(normalize=True), "to_csv": r.to_csv(),
        "to_df": df if isinstance(df, str) else frame_text(df), "verbose": r.verbose(),
        "txt": txt.read_bytes(), "txt_conf": txt_conf.read_bytes(),
        "crops": sorted(str(p.relative_to(crops)) for p in crops.rglob("*.jpg")),
        "crops_dir": str(crops), "crop_name": f"image_{i}",
        "first": {"len": len(first), "boxes": arrays(first.boxes.data), "masks": arrays(first.masks.data),
                  "xy": first.masks.xy, "summary": first.summary()},
        "last_boxes": arrays(last.boxes.data),
        "slice_boxes": arrays(r[1:3].boxes.data), "slice_masks": arrays(r[1:3].masks.data),
        "masks_item": arrays(r.masks[1].data), "masks_item_xy": r.masks[1].xy,
        "boxes_item": arrays(r.boxes[1].data), "boxes_item_xywhn": arrays(r.boxes[1].xywhn),
        "numpy_types": [type(on_numpy.boxes.data).__name__, type(on_numpy.masks.data).__name__,
                        type(on_numpy.boxes.xywhn).__name__],
        "numpy_boxes": on_numpy.boxes.data, "numpy_xyxyn": on_numpy.boxes.xyxyn, "numpy_xy": on_numpy.masks.xy,
        "numpy_summary": on_numpy.summary(),
        "cpu_boxes": arrays(r.cpu().boxes.data),
        "half_dtypes": [str(half.boxes.data.dtype), str(half.masks.data.dtype)], "half_boxes": arrays(half.boxes.data),
    }


def metrics_record(m):
    def metric(s):
        return {k: getattr(s, k) for k in ("p", "r", "f1", "all_ap", "ap_class_index", "p_curve", "r_curve",
                                           "f1_curve", "px", "prec_values", "ap50", "ap", "maps", "mp", "mr",
                                           "map50", "map75", "map", "nc")}

    cm = m.confusion_matrix
    df, cm_df = to_df_or_none(m), to_df_or_none(cm, normalize=True)
    return {
        "box": metric(m.box), "seg": metric(m.seg), "names": m.names, "keys": m.keys,
        "results_dict": m.results_dict, "fitness": m.fitness, "maps": m.maps, "mean_results": m.mean_results(),
        "class_result": [m.class_result(i) for i in range(len(m.ap_class_index))], "curves": m.curves,
        "curves_results": [[x, y, a, b] for x, y, a, b in m.curves_results], "nt_per_class": m.nt_per_class,
        "nt_per_image": m.nt_per_image, "summary": m.summary(), "to_json": m.to_json(), "to_csv": m.to_csv(),
        "to_df": df if isinstance(df, str) else frame_text(df), "save_dir": str(m.save_dir),
        "cm_matrix": cm.matrix, "cm_summary": cm.summary(), "cm_summary_n": cm.summary(normalize=True),
        "cm_to_json": cm.to_json(), "cm_to_csv": cm.to_csv(normalize=True),
        "cm_to_df": cm_df if isinstance(cm_df, str) else frame_text(cm_df), "cm_tp_fp": cm.tp_fp(),
    }


def main():
    work = Path(".").absolute()
    model = YOLO("weights.safetensors")
    images = sorted(str(p) for p in work.glob("*.jpg"))
    results = model.predict(images, save=True, project=str(work / "runs"), name="predict")
    unsaved = model.predict(images[0])
    streamed = next(iter(model.predict(images[0], stream=True, save=True, project=str(work / "runs"), name="streamed")))
    records = [result_record(r, i, work) for i, r in enumerate(results) if len(r) >= 3]
    if not records:
        sys.exit(f"need an image with 3 or more detections, got {[len(r) for r in results]}")
    metrics = model.val(data=str(self_labelled(results, work)), imgsz=64, batch=4, device="cpu",
                        project=str(work / "runs"), name="val")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        info = model.info()
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        model.info(verbose=False)
    out = {"results": records, "metrics": metrics_record(metrics), "info": info, "info_printed": printed.getvalue(),
           "info_quiet": quiet.getvalue(), "unsaved_save_dir": unsaved[0].save_dir,
           "streamed_save_dir": streamed.save_dir, "empty": empty_record(model, work), "drawn": drawn_masks()}
    (work / "objects.pkl").write_bytes(pickle.dumps(out, protocol=4))
    print(f"{len(records)} images with detections, {sum(r['len'] for r in records)} detections recorded")


def self_labelled(results, work):
    """A validation set of the predicted images labelled by their own detections through save_txt():
    two of every three kept, every fifth kept one relabelled, so that validation has matches, misses,
    false positives and confusions (non-trivial metrics, curves and confusion matrix)."""
    root = work / "selfset"
    (root / "images" / "val").mkdir(parents=True)
    (root / "labels" / "val").mkdir(parents=True)
    for r in results:
        name = Path(r.path)
        (root / "images" / "val" / name.name).write_bytes(name.read_bytes())
        label = root / "labels" / "val" / f"{name.stem}.txt"
        r[[i for i in range(len(r)) if i % 3 != 2]].save_txt(label)
        lines = label.read_text().splitlines() if label.exists() else []
        for i in range(0, len(lines), 5):
            c, rest = lines[i].split(" ", 1)
            lines[i] = f"{(int(c) + 1) % len(r.names)} {rest}"
        label.write_text("".join(line + "\n" for line in lines))
    names = "".join(f"  {k}: {v}\n" for k, v in results[0].names.items())
    (root / "data.yaml").write_text(f"train: images/val\nval: images/val\nnames:\n{names}")
    return root / "data.yaml"


def drawn_masks():
    """Masks made as a user makes them (a tensor, no prediction), of several regions each, with holes
    and regions inside holes: lucid's Masks(data, orig_shape).xy traces them itself; once at the
    image's size and once at a letterboxed input's (64 x 64 for a 96 x 80 image)."""
    rng = np.random.default_rng(3)
    out = {}
    for shape, frame in (((96, 80), (96, 80)), ((96, 80), (64, 64))):
        data = np.zeros((6, *frame), np.float32)
        for m in data:
            for _ in range(rng.integers(2, 6)):
                y, x = rng.integers(0, frame[0] - 4), rng.integers(0, frame[1] - 4)
                h, w = rng.integers(3, 20, 2)
                m[y:y + h, x:x + w] = 1
                if h > 8 and w > 8:  # a hole, and an island in it
                    m[y + 2:y + h - 2, x + 2:x + w - 2] = 0
                    m[y + 4:y + h - 4, x + 4:x + w - 4] = h % 2
        masks = Masks(torch.from_numpy(data), shape)
        out[frame] = {"data": data, "orig_shape": shape, "xy": masks.xy, "xyn": masks.xyn,
                      "numpy_xy": Masks(data, shape).xy}
    return out


def empty_record(model, work):
    """A result without detections (conf=1.0): the reference's empty forms."""
    r = model.predict(sorted(work.glob("*.jpg"))[0], conf=1.0)[0]
    txt = work / "empty.txt"
    return {"len": len(r), "masks": r.masks, "summary": r.summary(), "to_json": r.to_json(), "to_csv": r.to_csv(),
            "verbose": r.verbose(), "txt_written": Path(r.save_txt(txt)).exists()}


if __name__ == "__main__":
    main()
