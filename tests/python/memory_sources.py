"""Run by test_memory_sources.py with the installed lucid_yolo, in a folder holding weights.safetensors
and a few images (*.png, lossless): predictions from numpy arrays, PIL images, tensors and lists of
them must equal the predictions of the same pixels read from the PNG files, box for box and mask for
mask, under the reference's names, with no temporary file written."""
import os
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.environ["LUCID_TEST_COMMON"])
from lucid_runs import check, failures  # noqa: E402

from lucid_yolo import YOLO  # noqa: E402


def same(a, b):
    """Equal detections: boxes, scores and classes bit for bit, and every mask pixel."""
    if not torch.equal(a.boxes.data, b.boxes.data) or a.orig_shape != b.orig_shape:
        return False
    return (a.masks is None) == (b.masks is None) and (a.masks is None or torch.equal(a.masks.data, b.masks.data))


def expect_error(kind, words, call):
    try:
        call()
    except kind as e:
        return all(w in str(e) for w in words)
    return False


def main():
    model = YOLO("weights.safetensors")
    pngs = sorted(Path(".").glob("*.png"))
    rgbs = [np.asarray(Image.open(p).convert("RGB")) for p in pngs]
    refs = [model.predict(str(p))[0] for p in pngs]
    check(sum(len(r) for r in refs) > 0 and not same(refs[0], refs[1]),
          f"the PNG files' predictions hold {[len(r) for r in refs]} detections, the images' own")
    for p, rgb, ref in zip(pngs, rgbs, refs):
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        r = model.predict(bgr)[0]
        check(same(r, ref) and r.path == "image0.jpg" and np.array_equal(r.orig_img, bgr),
              f"{p}: a BGR numpy array gives the PNG's {len(ref)} detections, path image0.jpg, orig_img the array")
        r = model(Image.open(p))[0]
        check(same(r, ref) and r.path == str(p), f"{p}: a PIL image opened from the file, under its file name")
        r = model(Image.fromarray(rgb))[0]
        check(same(r, ref) and r.path == "image0.jpg", f"{p}: a PIL image made in memory, as image0.jpg")
    bgrs = [np.ascontiguousarray(x[..., ::-1]) for x in rgbs]
    listed = model.predict(bgrs)
    check(len(listed) == len(refs) and all(same(a, b) for a, b in zip(listed, refs))
          and [r.path for r in listed] == [f"image{i}.jpg" for i in range(len(refs))],
          f"a list of {len(bgrs)} arrays: each the PNG's detections, image0.jpg ... in order")
    streamed = list(model.predict(bgrs, stream=True, batch=2))
    check(len(streamed) == len(refs) and all(same(a, b) for a, b in zip(streamed, refs)),
          "stream=True, batch=2 over the arrays: the same detections")
    mixed = model.predict([bgrs[0], str(pngs[1])])
    check(same(mixed[0], refs[0]) and same(mixed[1], refs[1]) and [r.path for r in mixed] == ["image0.jpg", str(pngs[1])],
          "a list of an array and a path: each the PNG's detections")
    check_tensors(model, rgbs)
    check_refusals(model, rgbs[0])
    model.predict(bgrs[:1], save=True, project="saved", name="run")
    check((Path("saved") / "run" / "image0.jpg").stat().st_size > 0, "save=True draws an array as saved/run/image0.jpg")
    check(os.listdir(os.environ["TMPDIR"]) == [], "no temporary file was written for images in memory")


def check_tensors(model, rgbs):
    """A BCHW RGB 0-1 tensor is predicted at its own size, as the PNG of its pixels at imgsz = its long side."""
    h, w = (min(x.shape[0] for x in rgbs) // 32) * 32, (min(x.shape[1] for x in rgbs) // 32) * 32
    crops = [np.ascontiguousarray(x[:h, :w]) for x in rgbs[:2]]
    for i, c in enumerate(crops):
        Image.fromarray(c).save(f"crop{i}.png")
    refs = [model.predict(f"crop{i}.png", imgsz=max(h, w))[0] for i in range(2)]
    batch = torch.stack([torch.from_numpy(c).permute(2, 0, 1) for c in crops]).float() / 255
    got = model.predict(batch)
    check(len(got) == 2 and all(same(a, b) for a, b in zip(got, refs)) and [r.path for r in got] == ["image0.jpg", "image1.jpg"],
          f"a (2, 3, {h}, {w}) tensor: each image the PNG's {[len(r) for r in refs]} detections at imgsz={max(h, w)}")
    check(np.array_equal(got[0].orig_img, crops[0][..., ::-1]), "a tensor's orig_img is its pixels in BGR")
    check(same(model(batch[0])[0], refs[0]), "a (3, H, W) tensor is one image")
    check(same(model.predict(batch[:1] * 255)[0], refs[0]), "a tensor in 0-255 is divided by 255, as the reference")
    check(all(same(a, b) for a, b in zip(model.predict([batch[:1], batch[1:]]), refs)), "a list of tensors")


def check_refusals(model, rgb):
    check(expect_error(ValueError, ["uint8", "float32"], lambda: model.predict(rgb.astype(np.float32))),
          "a float array is refused, naming the dtype")
    check(expect_error(ValueError, ["(H, W, 3)"], lambda: model.predict(rgb[..., 0])), "a 2-D array is refused")
    check(expect_error(ValueError, ["divisible by stride 32", "(1, 3, 100, 100)"],
                       lambda: model.predict(torch.rand(1, 3, 100, 100))), "a tensor not a multiple of 32 is refused")
    check(expect_error(ValueError, ["cannot be mixed"], lambda: model.predict([torch.rand(1, 3, 64, 64), rgb])),
          "tensors mixed with arrays are refused")
    check(expect_error(TypeError, ["dict"], lambda: model.predict({"a": 1})), "a dict source is refused")


if __name__ == "__main__":
    main()
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
