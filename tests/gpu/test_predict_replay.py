"""Prediction on the GPU replays the forward from CUDA graphs recorded per input shape
(inference/replayed_network.h), ahead of the images that need them (predict/shape_lookahead.h); the
replayed forward must write the eager forward's bytes. A yolo26n-seg trained 3 epochs on the
embedded synthetic set (class 0's logits raised, for confident detections) predicts 12 images of 8
sizes (4 letterbox shapes at batch 1, the full square for mixed batches) at batch 1 and 4, with
the one-to-one head (nms=False) and the one-to-many head with NMS: `lucid predict save_json=True`
with LUCID_PREDICT_REPLAY=0 (the eager forward) and by default must write the same predictions.json
(boxes, scores and mask RLEs), byte for byte, and the default runs must say how many shapes they
replayed. Skipped without a usable CUDA device."""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import LUCID  # noqa: E402
from test_export_half import confident_weights, cuda_usable  # noqa: E402

SIZES = [(128, 128), (96, 128), (128, 96), (160, 120), (120, 160), (100, 140), (140, 100), (64, 128)]


def letterbox_shape(h, w, imgsz=128, stride=32):
    """The minimal letterbox of an (h, w) image: resized into imgsz, padded to a multiple of stride."""
    r = min(imgsz / h, imgsz / w)
    nh, nw = round(h * r), round(w * r)
    return nh + (imgsz - nh) % stride, nw + (imgsz - nw) % stride


def mixed_sizes(val, out):
    """12 images of SIZES (height, width) resized from the synthetic validation images, lossless."""
    from PIL import Image

    out.mkdir()
    sources = sorted(val.iterdir())
    for k in range(12):
        h, w = SIZES[k % len(SIZES)]
        Image.open(sources[k % len(sources)]).convert("RGB").resize((w, h)).save(out / f"im{k:02d}.png")
    return out


def predict(weights, source, project, name, env, extra):
    r = subprocess.run([str(LUCID), "predict", f"model={weights}", f"source={source}", "imgsz=128", "conf=0.25",
                        "device=0", "save=False", "save_json=True", f"project={project}", f"name={name}", *extra],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lucid predict {' '.join(extra)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    shapes = re.search(r"replayed recordings of (\d+) input shape", r.stdout)
    return (Path(project) / name / "predictions.json").read_bytes(), int(shapes.group(1)) if shapes else None, r


def main():
    if not cuda_usable():
        print("no usable CUDA device: skipped")
        return
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        weights = confident_weights(tmp, env)
        images = mixed_sizes(tmp / "cache" / "synth-v1" / "images" / "val", tmp / "mixed")
        for batch, nms in ((1, "nms=False"), (4, "nms=False"), (1, "nms=True"), (4, "nms=True")):
            extra = [f"batch={batch}", nms]
            name = f"b{batch}-{nms.replace('=', '')}"
            eager, eager_shapes, _ = predict(weights, images, tmp / "runs", name + "-eager",
                                             dict(env, LUCID_PREDICT_REPLAY="0"), extra)
            replay, shapes, r = predict(weights, images, tmp / "runs", name + "-replay", env, extra)
            detections = eager.count(b'"score"')
            print(f"batch={batch} {nms}: {detections} detections; replayed {shapes} shape(s); "
                  f"predictions.json {'equal' if eager == replay else 'DIFFERENT'}")
            if eager != replay:
                failures.append(f"batch={batch} {nms}: the replayed forward's predictions differ from the eager's")
            if detections == 0:
                failures.append(f"batch={batch} {nms}: no detection to compare")
            if eager_shapes is not None:
                failures.append(f"batch={batch} {nms}: LUCID_PREDICT_REPLAY=0 still replayed")
            # batch 1: each image's own letterbox; mixed batches of 4: the full square only
            expected = len({letterbox_shape(*SIZES[k % len(SIZES)]) for k in range(12)}) if batch == 1 else 1
            if shapes != expected:
                failures.append(f"batch={batch} {nms}: {shapes} shapes replayed, expected {expected}:\n"
                                f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
