"""lucid_yolo's Results, Boxes, Masks, SegmentMetrics and ConfusionMatrix against the reference's own
objects on the same detections and statistics.

The installed package (build/pyvenv, no reference package) predicts the validation images of a small
synthetic set with one-epoch weights raised to confident detections, validates on that set, and
records what every method returns (tests/python/results_objects.py). Here the reference's
ultralytics.engine.results.Results is built from the very arrays lucid returned (the image, the
(n, 6) boxes, the (n, H, W) masks) and must give:
- boxes xyxy, xywh, xyxyn, xywhn, conf, cls: equal;
- masks.xy and masks.xyn (the reference's cv2.findContours + merge of every region): equal point
  for point (tolerance 0: lucid traces the same contours and joins them the same way);
- summary() (plain and normalized, decimals=3), to_json(), to_csv(), to_df(), verbose(), save_txt()
  (file bytes, with and without save_conf): equal; save_crop(): the same files, crops of the same size;
- r[0], r[n-1], r[1:3], masks[1], boxes[1], numpy(), cpu(), to(float16): equal data;
- an empty result (conf=1.0): the reference's empty summary, JSON, CSV and verbose, no label file.
The reference's SegmentMetrics is built from lucid's per-class statistics (p, r, f1, all_ap, the
curves, nt_per_class, nt_per_image) and its ConfusionMatrix from lucid's matrix: keys, results_dict,
maps, fitness, mean_results, class_result, curves, curves_results, summary, to_json, to_csv, to_df
and the matrix's summary (plain and normalized), to_json, to_csv, to_df and tp_fp must equal lucid's
(the means within 1e-12: the reference averages the arrays, lucid's validator its own sums). Values
recomputed from the curves as the reference's ap_per_class does (P, R, F1 at the smoothed
mean-F1's maximum) must equal lucid's, and each true class's column of the confusion matrix must sum
to its instance count. model.info() returns the reference SegmentationModel's (layers, parameters,
gradients, GFLOPs) for the same architecture and prints its summary line.
"""
import json
import logging
import pickle
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from lucid_runs import check, confident_model, failures  # noqa: E402
from package_env import package_workdir, run_package_script  # noqa: E402

from ultralytics.engine.results import Results  # noqa: E402
from ultralytics.utils.metrics import ConfusionMatrix, SegmentMetrics, smooth  # noqa: E402


def same_arrays(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b)


def same_polygons(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and same_arrays(x, y) for x, y in zip(a, b))


def frame_json(df):
    return df.write_json()


def compare_result(rec, tmp):
    """One image: the reference's Results from lucid's arrays against lucid's recorded outputs."""
    name = Path(rec["path"]).name
    boxes = torch.from_numpy(rec["boxes"]["data"])
    masks = torch.from_numpy(rec["masks"]).float()
    ref = Results(rec["orig_img"], rec["path"], rec["names"], boxes=boxes, masks=masks)
    check(ref.orig_shape == rec["orig_shape"] and cv2.imread(rec["path"]).shape[:2] == rec["orig_shape"],
          f"{name}: orig_shape {rec['orig_shape']} of the image file")
    for k in ("xyxy", "xywh", "xyxyn", "xywhn", "conf", "cls"):
        check(same_arrays(getattr(ref.boxes, k).numpy(), rec["boxes"][k]), f"{name}: boxes.{k} equal")
    check(same_polygons(ref.masks.xy, rec["xy"]) and same_polygons(ref.masks.xyn, rec["xyn"]),
          f"{name}: masks.xy and xyn equal point for point ({sum(len(p) for p in rec['xy'])} points over "
          f"{len(rec['xy'])} masks, {sum(len(cv2.findContours(m, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]) > 1 for m in rec['masks'])} of several regions)")
    check(ref.summary() == rec["summary"] and ref.summary(normalize=True, decimals=3) == rec["summary_n"],
          f"{name}: summary() and summary(normalize=True, decimals=3) equal")
    check(ref.to_json() == rec["to_json"] and ref.to_json(normalize=True) == rec["to_json_n"],
          f"{name}: to_json() and to_json(normalize=True) equal ({len(rec['to_json'])} characters)")
    check(ref.to_csv() == rec["to_csv"], f"{name}: to_csv() equal")
    check(frame_json(ref.to_df()) == rec["to_df"], f"{name}: to_df() equal frames ({rec['to_df'][:60]}...)")
    check(ref.verbose() == rec["verbose"], f"{name}: verbose() {rec['verbose']!r}")
    txt, txt_conf = tmp / f"{name}.txt", tmp / f"{name}_conf.txt"
    ref.save_txt(txt)
    ref.save_txt(txt_conf, save_conf=True)
    check(txt.read_bytes() == rec["txt"] and txt_conf.read_bytes() == rec["txt_conf"],
          f"{name}: save_txt() file bytes equal, without and with save_conf ({len(rec['txt'].splitlines())} lines)")
    compare_crops(ref, rec, tmp / f"crops_{name}")
    compare_indexing(ref, rec, name)


def compare_crops(ref, rec, crops):
    ref.save_crop(crops, file_name=rec["crop_name"])
    theirs = sorted(str(p.relative_to(crops)) for p in crops.rglob("*.jpg"))
    shapes = [(cv2.imread(str(crops / f)).shape, cv2.imread(str(Path(rec["crops_dir"]) / f)).shape)
              for f in theirs if f in rec["crops"]]
    check(theirs == rec["crops"] and all(a == b for a, b in shapes),
          f"save_crop(): the same {len(theirs)} files (class folders, -2, -3 ...), crops of the same size")


def compare_indexing(ref, rec, name):
    first, last, part = ref[0], ref[len(ref) - 1], ref[1:3]
    check(len(ref) == rec["len"] and len(first) == rec["first"]["len"] == 1
          and same_arrays(first.boxes.data, rec["first"]["boxes"]) and same_arrays(first.masks.data, rec["first"]["masks"])
          and same_polygons(first.masks.xy, rec["first"]["xy"]) and first.summary() == rec["first"]["summary"]
          and same_arrays(last.boxes.data, rec["last_boxes"]),
          f"{name}: r[0] and r[n-1] hold that instance's box and mask, xy and summary")
    check(same_arrays(part.boxes.data, rec["slice_boxes"]) and same_arrays(part.masks.data, rec["slice_masks"]),
          f"{name}: r[1:3] boxes and masks")
    check(same_arrays(ref.masks[1].data, rec["masks_item"]) and same_polygons(ref.masks[1].xy, rec["masks_item_xy"])
          and same_arrays(ref.boxes[1].data, rec["boxes_item"]) and same_arrays(ref.boxes[1].xywhn, rec["boxes_item_xywhn"]),
          f"{name}: masks[1] (data, xy) and boxes[1] (data, xywhn)")
    on_numpy = ref.numpy()
    check([type(on_numpy.boxes.data).__name__, type(on_numpy.masks.data).__name__,
           type(on_numpy.boxes.xywhn).__name__] == rec["numpy_types"]
          and same_arrays(on_numpy.boxes.data, rec["numpy_boxes"]) and same_arrays(on_numpy.boxes.xyxyn, rec["numpy_xyxyn"])
          and same_polygons(on_numpy.masks.xy, rec["numpy_xy"]) and on_numpy.summary() == rec["numpy_summary"],
          f"{name}: numpy(): numpy data, xyxyn, xy and summary ({rec['numpy_types']})")
    half = ref.to(torch.float16)
    check(same_arrays(ref.cpu().boxes.data, rec["cpu_boxes"])
          and [str(half.boxes.data.dtype), str(half.masks.data.dtype)] == rec["half_dtypes"]
          and same_arrays(half.boxes.data, rec["half_boxes"]), f"{name}: cpu() and to(torch.float16) {rec['half_dtypes']}")


def reference_metric(metric, d):
    metric.update((d["p"], d["r"], d["f1"], d["all_ap"], d["ap_class_index"], d["p_curve"], d["r_curve"],
                   d["f1_curve"], d["px"], d["prec_values"]))
    metric.nc = d["nc"]


def compare_metrics(m):
    ref = SegmentMetrics(m["names"])
    reference_metric(ref.box, m["box"])
    reference_metric(ref.seg, m["seg"])
    ref.nt_per_class, ref.nt_per_image = m["nt_per_class"], m["nt_per_image"]
    cm = ConfusionMatrix(m["names"])
    cm.matrix = m["cm_matrix"]
    ref.confusion_matrix = cm
    n = len(m["box"]["ap_class_index"])
    check(n > 0 and ref.keys == m["keys"] and list(ref.results_dict) == list(m["results_dict"])
          and all(abs(ref.results_dict[k] - v) <= 1e-12 for k, v in m["results_dict"].items())
          and abs(ref.fitness - m["fitness"]) <= 1e-12
          and np.allclose(ref.mean_results(), m["mean_results"], rtol=0, atol=1e-12)
          and np.allclose(ref.maps, m["maps"], rtol=0, atol=1e-12),
          f"metrics: keys, results_dict, fitness, mean_results, maps ({n} classes with labels; fitness {m['fitness']:.5f})")
    check(all(np.allclose(ref.class_result(i), m["class_result"][i], rtol=0, atol=1e-12) for i in range(n)),
          "metrics: class_result(i) of every class")
    curves = ref.curves_results
    check(ref.curves == m["curves"] and len(curves) == len(m["curves_results"]) == 8
          and all(same_arrays(a[0], b[0]) and same_arrays(a[1], b[1]) and a[2:] == b[2:] for a, b in zip(curves, m["curves_results"])),
          f"metrics: curves names and curves_results (8 curves of {m['box']['p_curve'].shape})")
    check(ref.summary() == m["summary"] and ref.to_json() == m["to_json"] and ref.to_csv() == m["to_csv"]
          and frame_json(ref.to_df()) == m["to_df"], f"metrics: summary, to_json, to_csv, to_df equal ({m['to_csv'].splitlines()[0]})")
    check(cm.summary() == m["cm_summary"] and cm.summary(normalize=True) == m["cm_summary_n"]
          and cm.to_json() == m["cm_to_json"] and cm.to_csv(normalize=True) == m["cm_to_csv"]
          and frame_json(cm.to_df(normalize=True)) == m["cm_to_df"]
          and all(same_arrays(a, b) for a, b in zip(cm.tp_fp(), m["cm_tp_fp"])),
          f"confusion_matrix: summary (plain, normalized), to_json, to_csv, to_df, tp_fp ({m['cm_matrix'].shape})")
    nc = len(m["names"])
    check(same_arrays(m["cm_matrix"][:, :nc].sum(0), m["nt_per_class"]) and m["cm_matrix"].sum() > 0,
          f"confusion_matrix: each true class's column sums to its {m['nt_per_class'].tolist()} instances")
    for s in ("box", "seg"):
        d = m[s]
        best = smooth(d["f1_curve"].mean(0), 0.1).argmax()
        check(same_arrays(d["p"], d["p_curve"][:, best]) and same_arrays(d["r"], d["r_curve"][:, best])
              and same_arrays(d["f1"], d["f1_curve"][:, best])
              and np.allclose(d["f1_curve"], 2 * d["p_curve"] * d["r_curve"] / (d["p_curve"] + d["r_curve"] + 1e-16), atol=1e-12),
              f"metrics.{s}: P, R, F1 are the curves' values at the smoothed mean F1's maximum (index {best})")


def compare_info(o, weights_nc):
    from ultralytics.nn.tasks import SegmentationModel

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("ultralytics")
    logger.addHandler(handler)
    try:
        ref = SegmentationModel("yolo26n-seg.yaml", nc=weights_nc, verbose=False).info(imgsz=640)
    finally:
        logger.removeHandler(handler)
    ours = o["info"]
    check(ours[:3] == ref[:3] and abs(ours[3] - ref[3]) <= 0.005 * ref[3],
          f"model.info(): (layers, parameters, gradients, GFLOPs) {tuple(ours)} vs the reference's {tuple(ref)}")
    check(o["info_printed"].strip() == lines[-1] and o["info_quiet"] == "",
          f"model.info() prints {o['info_printed'].strip()!r} as the reference; verbose=False prints nothing")


def compare_drawn(drawn):
    from ultralytics.engine.results import Masks

    for frame, d in drawn.items():
        ref = Masks(torch.from_numpy(d["data"]), d["orig_shape"])
        regions = [len(cv2.findContours(m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]) for m in d["data"]]
        check(same_polygons(ref.xy, d["xy"]) and same_polygons(ref.xyn, d["xyn"]) and same_polygons(ref.xy, d["numpy_xy"]),
              f"Masks from a tensor and an array of {frame[0]} x {frame[1]} for a {d['orig_shape']} image: xy and xyn "
              f"equal point for point (regions per mask {regions})")


def compare_empty(e, tmp):
    ref = Results(np.zeros((8, 8, 3), np.uint8), "x.jpg", {0: "a"}, boxes=torch.zeros((0, 6)))
    txt = tmp / "empty.txt"
    ref.save_txt(txt)
    check(e["len"] == len(ref) == 0 and e["masks"] is None and e["summary"] == ref.summary()
          and e["to_json"] == ref.to_json() and e["to_csv"] == ref.to_csv() and e["verbose"] == ref.verbose()
          and e["txt_written"] == txt.exists() is False,
          f"no detections: no masks, summary {e['summary']}, to_json {e['to_json']!r}, to_csv {e['to_csv']!r}, "
          f"verbose {e['verbose']!r}, no label file")


def main():
    with package_workdir() as (tmp, env, work):
        _, images = confident_model(tmp, env, work / "weights.safetensors")
        for jpg in images:
            shutil.copy(jpg, work / jpg.name)
        run_package_script("results_objects.py", work, env)
        o = pickle.loads((work / "objects.pkl").read_bytes())
        for rec in o["results"]:
            check(rec["save_dir"] == str(work / "runs" / "predict") and (Path(rec["save_dir"]) / Path(rec["path"]).name).exists(),
                  f"{Path(rec['path']).name}: save_dir is the run folder that predict(save=True) wrote ({rec['save_dir']})")
            compare_result(rec, Path(tmp))
        check(o["unsaved_save_dir"] is None and o["streamed_save_dir"] == str(work / "runs" / "streamed"),
              f"save_dir: None when predict writes nothing; stream=True, save=True: {o['streamed_save_dir']}")
        compare_empty(o["empty"], Path(tmp))
        compare_drawn(o["drawn"])
        compare_metrics(o["metrics"])
        compare_info(o, len(o["metrics"]["names"]))
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {json.dumps(failures, indent=1)}")
    print("all checks passed")


if __name__ == "__main__":
    main()
