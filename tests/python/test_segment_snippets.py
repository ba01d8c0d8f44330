"""The reference documentation's segmentation snippets (segment_snippets.py) run with the installed
lucid_yolo package on a synthetic dataset, on the CPU; what they computed must equal the `lucid`
command's results on the same weights and data:

- train: the Python fit's checkpoint bytes equal `lucid train` with the same options; the callbacks
  saw every epoch, with the results.csv losses and metrics of that epoch;
- val: box/mask P, R, mAP50, mAP50-95 as `lucid val` prints them;
- predict (an image, a list, a stream, a folder, a video): per image or frame the detections of
  `lucid predict save_json=True`: classes, boxes (1e-3 px), scores (1e-5), mask areas;
- results: boxes/masks shapes, plot(), save(), to_json(); export: an ONNX file that onnx loads."""
import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, confident, digest, failures, lucid, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402

TRAIN = ["epochs=2", "imgsz=64"]


def write_video(frames, path):
    """An MPEG-4 video of the given image files (OpenCV, as a user's camera or editor writes one)."""
    import cv2

    first = cv2.imread(str(frames[0]))
    h, w = first.shape[:2]
    out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (w, h))
    for f in frames:
        out.write(cv2.resize(cv2.imread(str(f)), (w, h)))
    out.release()


def prepare(work, env):
    """The files the snippets name, in their working directory."""
    synth = synth_data(work / "synth", env, 16, 6, 128)
    # The dataset under the reference's name, its folder named by path: (the YAML's relative paths
    # are relative to it).
    (work / "coco8-seg.yaml").write_text(f"path: {synth.parent}\n{synth.read_text()}")
    lucid(["train", "model=yolo26n-seg.yaml", "data=coco8-seg.yaml", "epochs=1", "imgsz=64", "device=cpu",
           f"project={work / 'pre'}", "name=run"], env, cwd=work)
    best = work / "pre" / "run" / "weights" / "best.safetensors"
    plain = work / "pre" / "plain.safetensors"
    lucid(["export", f"model={best}", "format=safetensors", f"out={plain}"], env)
    lucid(["export", f"model={confident(plain)}", "format=pt", f"out={work / 'yolo26n-seg.pt'}"], env)
    (work / "path" / "to" / "dir").mkdir(parents=True)
    shutil.copy(work / "yolo26n-seg.pt", work / "path" / "to" / "best.pt")
    images = sorted((synth.parent / "images" / "val").glob("*.jpg"))
    for name, src in zip(["bus.jpg", "image1.jpg", "image2.jpg"], images):
        shutil.copy(src, work / name)
    for src in images[3:5]:
        shutil.copy(src, work / "path" / "to" / "dir" / src.name)
    write_video(images, work / "path" / "to" / "video.mp4")
    write_video(images[:3], work / "path" / "to" / "dir" / "clip.mp4")


def lucid_predictions(work, env, source, name):
    """`lucid predict save_json=True` on the source: its predictions.json records."""
    lucid(["predict", "model=yolo26n-seg.pt", f"source={source}", "save=False", "save_json=True",
           f"project={work / 'cli'}", f"name={name}"], env, cwd=work)
    return json.loads((work / "cli" / name / "predictions.json").read_text())


def compare_detections(python, cli, what):
    """Python results (one per image or frame, in order) against lucid predict's records."""
    from pycocotools import mask as mask_utils

    by_image = {}
    for r in cli:
        by_image.setdefault((r["file_name"], r.get("frame", 0)), []).append(r)
    check(sum(len(d["cls"]) for d in python) == len(cli), f"{what}: {len(cli)} detections as lucid predict")
    for d in python:
        key = (Path(d["path"]).name, d["frame"] or 0)
        recs = by_image.get(key, [])
        ok = len(recs) == len(d["cls"])
        for r, xyxy, conf, cls, area in zip(recs, d["xyxy"], d["conf"], d["cls"], d["mask_areas"]):
            x1, y1, x2, y2 = xyxy
            ok &= r["category_id"] - 1 == int(cls)
            ok &= all(abs(a - b) <= 1e-3 + 1e-9 for a, b in zip(r["bbox"], [x1, y1, x2 - x1, y2 - y1]))
            ok &= abs(r["score"] - conf) <= 1e-5 + 1e-9
            ok &= int(mask_utils.area({"size": r["segmentation"]["size"], "counts": r["segmentation"]["counts"]})) == int(area)
        ok &= d["mask_shape"] is None or d["mask_shape"][1:] == d["orig_shape"]
        check(ok, f"{what}: {key[0]} frame {key[1]}: {len(d['cls'])} detections equal lucid predict's")


def val_row(stdout):
    """The eight numbers of the 'all' row that lucid val prints."""
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "all" and len(parts) == 11:
            return [float(v) for v in parts[3:]]
    sys.exit(f"no 'all' row in lucid val's output:\n{stdout[-2000:]}")


def check_train(work, env, rec):
    t = rec["train"]
    run = work / t["save_dir"]  # relative to the snippets' working directory, as the reference's
    lucid(["train", "model=yolo26n-seg.yaml", "pretrained=yolo26n-seg.pt", "data=coco8-seg.yaml", *TRAIN,
           f"project={work / 'cli'}", "name=train"], env, cwd=work)
    cli = work / "cli" / "train"
    for f in ["weights/last.safetensors", "weights/best.safetensors", "step_losses.f32"]:
        check(digest(run / f) == digest(cli / f), f"train: {f} equals lucid train's, byte for byte")
    rows = list(csv.DictReader((run / "results.csv").open()))
    seen = t["epochs_seen"]
    check([e["epoch"] for e in seen] == [0, 1], "on_train_epoch_end: called for epochs 0 and 1")
    for e, row in zip(seen, rows):
        same = all(abs(v - float(row[k])) <= 1e-5 * max(1.0, abs(v)) for k, v in e["train"].items())
        check(same, f"on_train_epoch_end epoch {e['epoch']}: trainer.tloss equals results.csv {list(e['train'])}")
    for m, row in zip(t["fit_metrics"], rows):
        same = all(abs(v - float(row[k])) <= 1e-5 * max(1.0, abs(v)) for k, v in m.items())
        check(same and len(m) == 13, f"on_fit_epoch_end: trainer.metrics equal results.csv ({len(m)} keys)")
    final = t["fit_metrics"][-1]
    check(len(final) == 8 and all(abs(final[k] - v) <= 1e-9 for k, v in final.items() if k in t["results_dict"]),
          "the last on_fit_epoch_end: the final validation's 8 metrics, as the reference's final_eval")
    check(len(t["fit_metrics"]) == 3 and t["ended"] == [t["save_dir"]],
          "on_fit_epoch_end per epoch and after the final validation, on_train_end once")
    check(t["model_after"] == str(Path(t["save_dir"]) / "weights" / "best.safetensors"),
          "after train() the model is the run's best")


def check_val(work, env, rec):
    r = lucid(["val", "model=path/to/best.pt", f"project={work / 'cli'}", "name=val"], env, cwd=work)
    row = val_row(r.stdout)
    v = rec["val"]
    mine = [v["results_dict"][k] for k in ["metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)",
                                           "metrics/mAP50-95(B)", "metrics/precision(M)", "metrics/recall(M)",
                                           "metrics/mAP50(M)", "metrics/mAP50-95(M)"]]
    check([float(f"{x:.3g}") for x in mine] == row, f"val: results_dict {['%.3g' % x for x in mine]} as lucid val {row}")
    check(v["box_map"] == v["results_dict"]["metrics/mAP50-95(B)"] and v["seg_map50"] == v["results_dict"]["metrics/mAP50(M)"],
          "val: box.map and seg.map50 are results_dict's")
    check(len(v["box_maps"]) == 3 and len(v["seg_maps"]) == 3 and 0 <= v["box_map75"] <= 1, "val: per-class maps (3 classes)")


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        env = package_env(tmp)
        prepare(work, env)
        out = Path(tmp) / "snippets.json"
        r = subprocess.run([str(PACKAGE_PYTHON), str(Path(__file__).parent / "segment_snippets.py"), str(out)],
                           cwd=work, env=env, capture_output=True, text=True)
        print(r.stdout[-3000:])
        if r.returncode != 0:
            sys.exit(f"the snippets failed:\n{r.stderr[-4000:]}")
        rec = json.loads(out.read_text())
        check_train(work, env, rec)
        check_val(work, env, rec)
        compare_detections(rec["predict_bus"], lucid_predictions(work, env, "bus.jpg", "bus"), "predict bus.jpg")
        listing = work / "list.txt"
        listing.write_text(f"{work / 'image1.jpg'}\n{work / 'image2.jpg'}\n")
        listed = lucid_predictions(work, env, listing, "list")
        compare_detections(rec["predict_list"], listed, "predict [image1, image2]")
        compare_detections(rec["predict_stream"], listed, "predict stream=True")
        compare_detections(rec["predict_dir"], lucid_predictions(work, env, "path/to/dir", "dir"), "predict folder")
        video = lucid_predictions(work, env, "path/to/video.mp4", "video")
        compare_detections(rec["predict_video"], video, "predict video stream")
        check(len(rec["predict_video"]) == 6 and [d["frame"] for d in rec["predict_video"]] == list(range(1, 7)),
              "predict video: 6 frames, in order")
        a = rec["results_attributes"]
        check(a["plot_shape"] == a["orig_shape"] + [3] and a["plot_changed"], "Results.plot(): the annotated image")
        check((work / a["saved"]).stat().st_size > 0 and (work / "result.jpg").stat().st_size > 0, "Results.save() wrote files")
        check(isinstance(a["json"], list) and all({"name", "class", "confidence", "box", "segments"} <= set(d) for d in a["json"]),
              f"Results.to_json(): {len(a['json'])} records with name, class, confidence, box, segments")
        check(all(0 <= v <= 1 for b in a["xyxyn"] + a["xywhn"] for v in b), "Boxes.xyxyn / xywhn are normalised")
        import onnx

        onnx.checker.check_model(onnx.load(str(work / rec["export"])))
        check(rec["export"].endswith(".onnx"), f"export(format='onnx') -> {rec['export']} (onnx checker passed)")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
