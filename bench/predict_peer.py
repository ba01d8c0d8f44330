"""Prediction and validation through a Python API, lucid_yolo's or the reference package's (the same
calls: YOLO(weights).predict(...), .val(...)), for bench/predict_peer.sh.
  predict_peer.py video OUT --images DIR [--frames 1000]   a 1280x720 video panned across the images
  predict_peer.py predict IMPL WEIGHTS SOURCE --batch B [--passes N]
  predict_peer.py frames IMPL WEIGHTS VIDEO                  model(frame) on each frame cv2 reads
  predict_peer.py val IMPL WEIGHTS DATA
IMPL: lucid (lucid_yolo) or ultralytics. predict runs N passes over SOURCE with one loaded model and
prints one JSON line per pass: its wall seconds, the images (or frames) predicted, and the per-image
milliseconds each package reports (the sum of its speed entries): median, max, the count over 3x the
median and the first five."""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def make_video(out, images, frames):
    """Each coco image, resized to cover 1280x720, is panned across for 25 frames."""
    import cv2

    paths = sorted(Path(images).glob("*.jpg"))
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"mp4v"), 30, (1280, 720))
    for f in range(frames):
        img = cv2.imread(str(paths[(f // 25) % len(paths)]))
        scale = max(1280 / img.shape[1], 720 / img.shape[0]) * 1.2
        img = cv2.resize(img, (round(img.shape[1] * scale), round(img.shape[0] * scale)))
        x = (img.shape[1] - 1280) * (f % 25) // 24
        writer.write(img[:720, x:x + 1280])
    writer.release()
    print(f"{out}: {frames} frames 1280x720")


def load(impl, weights):
    if impl == "lucid":
        from lucid_yolo import YOLO
    else:
        from ultralytics import YOLO
    return YOLO(weights)


def per_image_ms(r):
    return sum(v for v in r.speed.values() if v is not None)


def predict(impl, weights, source, batch, passes):
    model = load(impl, weights)
    for p in range(passes):
        t = time.perf_counter()
        ms = [per_image_ms(r) for r in model.predict(source, batch=batch, device=0, save=False, verbose=False,
                                                     stream=True)]
        wall = time.perf_counter() - t
        med = statistics.median(ms)
        print(json.dumps({"impl": impl, "pass": p + 1, "batch": batch, "wall_s": round(wall, 3), "images": len(ms),
                          "median_ms": round(med, 2), "max_ms": round(max(ms), 1),
                          "over_3x_median": sum(m > 3 * med for m in ms), "first_ms": [round(m, 1) for m in ms[:5]]}),
              flush=True)


def frames(impl, weights, video):
    """A video predicted frame by frame from memory, as a cv2 capture loop does: model(frame) on each
    BGR frame, one loaded model; wall time and per-frame milliseconds as predict's."""
    import cv2

    model = load(impl, weights)
    cap = cv2.VideoCapture(str(video))
    ms, t = [], time.perf_counter()
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        ms += [per_image_ms(r) for r in model(frame, device=0, verbose=False)]
    wall = time.perf_counter() - t
    med = statistics.median(ms)
    print(json.dumps({"impl": impl, "frames": len(ms), "wall_s": round(wall, 3), "median_ms": round(med, 2),
                      "max_ms": round(max(ms), 1), "over_3x_median": sum(m > 3 * med for m in ms)}), flush=True)


def val(impl, weights, data):
    model = load(impl, weights)
    t = time.perf_counter()
    m = model.val(data=data, device=0, plots=False, verbose=False)
    wall = time.perf_counter() - t
    print(json.dumps({"impl": impl, "val_wall_s": round(wall, 3), "mask_map50_95": round(float(m.seg.map), 4),
                      "box_map50_95": round(float(m.box.map), 4)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("video")
    v.add_argument("out")
    v.add_argument("--images", required=True)
    v.add_argument("--frames", type=int, default=1000)
    p = sub.add_parser("predict")
    p.add_argument("impl", choices=["lucid", "ultralytics"])
    p.add_argument("weights")
    p.add_argument("source")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--passes", type=int, default=1)
    f = sub.add_parser("frames")
    f.add_argument("impl", choices=["lucid", "ultralytics"])
    f.add_argument("weights")
    f.add_argument("video")
    q = sub.add_parser("val")
    q.add_argument("impl", choices=["lucid", "ultralytics"])
    q.add_argument("weights")
    q.add_argument("data")
    a = ap.parse_args()
    if a.cmd == "video":
        make_video(a.out, a.images, a.frames)
    elif a.cmd == "frames":
        frames(a.impl, a.weights, a.video)
    elif a.cmd == "predict":
        predict(a.impl, a.weights, a.source, a.batch, a.passes)
    else:
        val(a.impl, a.weights, a.data)


if __name__ == "__main__":
    sys.exit(main())
