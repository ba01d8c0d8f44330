"""`lucid predict` sources and options end to end (CPU, seconds: an untrained model from
`lucid model save` with conf=0, small images, a 10-frame video):
- a glob (`*`, `**`), a folder (not its subfolders) and a list file (paths relative to the list,
  absolute paths) predict the files the reference would, one log line each, with the network
  input's size (64x96 for a 120x200 image at imgsz=96), not the image's;
- a list file with a missing entry fails with one line naming the list and the line; a URL and an
  option out of range fail naming them; a broken video beside an image is warned about and skipped,
  alone it fails naming it;
- a video made with the FFmpeg libraries (tests/tools/video_tool) is predicted frame by frame with
  vid_stride=3: one `video 1/1 (frame k/3)` line a predicted frame, labels/<stem>_<k>.txt, and
  <stem>.avi decoded again has 3 frames of the input's size that differ from input frames 3, 6, 9
  inside their detections and match them (within codec tolerance) away from them;
- save_crop writes crops/<class>/<name>.jpg (then <name>-2.jpg, ...) of the reference's crop size;
- in a build without FFmpeg a video source is one line saying the build has no video support;
- batch=2 over images of one size and batch=2 on the video write the same labels, JSON and images
  as batch=1, and batch=3 over images of two sizes letterboxes each to the full square (the
  reference's rule for a batch of mixed sizes); show_boxes=False and show_conf=False draw differently from the defaults."""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, check, failures, lucid  # noqa: E402

VIDEO_TOOL = BUILD_DIR / "tests" / "video_tool"
PREDICT = ["conf=0", "max_det=4", "imgsz=96", "device=cpu"]


def lines(out, kind):
    return re.findall(rf"^{kind} \d+/\d+ .*$", out, re.M)


def tree_bytes(folder):
    """Every file under folder (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def read_video(path, out):
    r = subprocess.run([VIDEO_TOOL, "read", path, out], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"video_tool read {path} failed: {r.stderr}")
    frames = [np.asarray(Image.open(p), dtype=np.int32) for p in sorted(Path(out).glob("frame_*.png"))]
    return frames, r.stdout


def crop_size(b, w, h):
    """The reference's save_one_box crop (gain 1.02, pad 10, truncated, clipped) of an xywh bbox."""
    x1, y1, bw, bh = b
    cx, cy = x1 + bw / 2, y1 + bh / 2
    gw, gh = bw * 1.02 + 10, bh * 1.02 + 10
    clip = lambda v, hi: min(max(int(v), 0), hi)
    return clip(cx + gw / 2, w) - clip(cx - gw / 2, w), clip(cy + gh / 2, h) - clip(cy - gh / 2, h)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        model = tmp / "m.safetensors"
        lucid(["model", "save", "model=yolo26n-seg.yaml", "nc=3", f"out={model}"], env)
        base = ["predict", f"model={model}", *PREDICT, f"project={project}"]

        rng = np.random.default_rng(0)
        imgs = tmp / "imgs"
        (imgs / "sub").mkdir(parents=True)
        for name, (h, w) in {"a.jpg": (120, 200), "b.jpg": (120, 200), "c.png": (100, 150), "sub/d.jpg": (120, 200)}.items():
            arr = rng.integers(0, 255, (h // 10, w // 10, 3), dtype=np.uint8)
            Image.fromarray(arr).resize((w, h), Image.BILINEAR).save(imgs / name, quality=95)

        # Glob, recursive glob, folder.
        g = lucid([*base, f"source={imgs}/*.jpg", "name=glob"], env)
        got = lines(g.stdout, "image")
        check(len(got) == 2 and all(f"{imgs}/{n}" in l for n, l in zip(["a.jpg", "b.jpg"], got)), f"glob *.jpg: {got}")
        check(all(": 64x96 " in l for l in got), "the printed size is the network input (64x96), not the image's")
        g = lucid([*base, f"source={imgs}/**/*.jpg", "name=rglob", "save=False"], env)
        check(len(lines(g.stdout, "image")) == 3 and "sub/d.jpg" in g.stdout, "glob **/*.jpg reaches the subfolder")
        f = lucid([*base, f"source={imgs}", "name=folder", "save_txt=True", "save_json=True", "save_crop=True"], env)
        check(len(lines(f.stdout, "image")) == 3 and "sub/d.jpg" not in f.stdout, "folder: its 3 images, not its subfolder")

        # save_crop: one crop a detection, named after the image, of the reference's size.
        pj = json.loads((project / "folder" / "predictions.json").read_text())
        crops = sorted((project / "folder" / "crops").rglob("*.jpg"))
        check(len(pj) > 0 and len(crops) == len(pj), f"save_crop: {len(crops)} crops for {len(pj)} detections")
        sizes = {"a.jpg": (200, 120), "b.jpg": (200, 120), "c.png": (150, 100)}
        ok = True
        for stem in ("a", "b", "c"):
            dets = [p for p in pj if p["file_name"].startswith(stem + ".")]
            want = sorted(crop_size(p["bbox"], *sizes[p["file_name"]]) for p in dets)
            files = [c for c in crops if c.stem == stem or re.fullmatch(rf"{stem}-\d+", c.stem)]
            have = []
            for c in files:
                with Image.open(c) as im:
                    have.append(im.size)
            ok &= len(have) == len(want) and all(abs(a[0] - b[0]) <= 1 and abs(a[1] - b[1]) <= 1
                                                 for a, b in zip(sorted(have), want))
        check(ok, "crops are crops/<class>/<stem>[-k].jpg of the reference's crop size")
        check(all(c.parent.name in ("class0", "class1", "class2") for c in crops), "crops are sorted by class name")

        # batch=2 over the two images of one size: the same files as batch=1. batch=3 over images of two
        # sizes: each on the full 96 x 96 square, as the reference letterboxes a batch of mixed sizes.
        outputs = ["save_txt=True", "save_json=True", "save_crop=True"]
        lucid([*base, f"source={imgs}/*.jpg", "name=same1", *outputs], env)
        lucid([*base, f"source={imgs}/*.jpg", "name=same2", "batch=2", *outputs], env)
        a, b = tree_bytes(project / "same1"), tree_bytes(project / "same2")
        check(len(a) > 2 and a == b, f"batch=2 over images of one size writes the same {len(a)} files as batch=1")
        m = lucid([*base, f"source={imgs}", "name=folder3", "batch=3", *outputs], env)
        got = lines(m.stdout, "image")
        check(len(got) == 3 and all(": 96x96 " in l for l in got),
              f"batch=3 over images of two sizes: each at the full square, 96x96 ({got})")

        # Drawing options change the drawing.
        plots = (project / "folder" / "a.jpg").exists()
        if plots:
            for opt in ("show_boxes=False", "show_conf=False"):
                name = opt.split("=")[0]
                lucid([*base, f"source={imgs / 'a.jpg'}", f"name={name}", opt], env)
                check((project / name / "a.jpg").read_bytes() != (project / "folder" / "a.jpg").read_bytes(),
                      f"{opt} draws differently")
        else:
            print("SKIP drawing checks: the build has no cairo")

        # List file: relative to the list's folder, absolute; then a missing line.
        lst = imgs / "list.txt"
        lst.write_text(f"a.jpg\n{imgs / 'c.png'}\n")
        r = lucid([*base, f"source={lst}", "name=list", "save=False"], env)
        got = lines(r.stdout, "image")
        # Entries in sorted order, as the reference takes them: "/.../c.png" before "a.jpg".
        check(len(got) == 2 and "c.png" in got[0] and f"{imgs}/a.jpg" in got[1], f"list file: {got}")
        lst.write_text("a.jpg\n\nmissing.jpg\n")
        e = lucid([*base, f"source={lst}", "name=badlist"], env, expect=1)
        err = e.stderr.strip()
        check(len(err.splitlines()) == 1 and "list.txt line 3: missing.jpg" in err, f"bad list line: {err}")

        # Bad sources and options.
        e = lucid([*base, "source=https://example.com/a.jpg"], env, expect=1)
        check("not supported" in e.stderr and "https://example.com/a.jpg" in e.stderr, f"URL: {e.stderr.strip()}")
        for opt in ("batch=0", "vid_stride=x", "show_boxes=maybe"):
            e = lucid([*base, f"source={imgs}", opt], env, expect=1)
            check(opt.split("=")[0] in e.stderr and len(e.stderr.strip().splitlines()) == 1, f"{opt}: {e.stderr.strip()}")

        clip = tmp / "clip.mp4"
        w = subprocess.run([VIDEO_TOOL, "write", clip, "200", "120", "10", "10"], capture_output=True, text=True)
        if "no video support" in w.stderr:
            # A build without FFmpeg: a video source is one line saying so.
            clip.write_bytes(b"not decoded in this build")
            e = lucid([*base, f"source={clip}", "name=novideo"], env, expect=1)
            check("clip.mp4" in e.stderr and "no video support" in e.stderr and len(e.stderr.strip().splitlines()) == 1,
                  f"video without FFmpeg: {e.stderr.strip()}")
            print("SKIP video round trip: the build has no video support")
        else:
            check(w.returncode == 0, f"video_tool write: {w.stderr.strip()}")
            src_frames, info = read_video(clip, tmp / "src_frames")
            check(len(src_frames) == 10 and "size 200x120" in info, f"the test video: {info.strip()}")
            # max_det=1: the untrained model's boxes leave part of each frame undrawn.
            vbase = ["max_det=1" if a.startswith("max_det=") else a for a in base]
            v = lucid([*vbase, f"source={clip}", "name=video", "vid_stride=3", "save_txt=True", "save_json=True",
                       "save_crop=True"], env)
            got = lines(v.stdout, "video")
            check([re.search(r"\(frame (\d+)/(\d+)\)", l).groups() for l in got] == [("1", "3"), ("2", "3"), ("3", "3")]
                  and all(f"{clip}: 64x96 " in l for l in got), f"vid_stride=3: {got}")
            out = project / "video"
            check(sorted(p.name for p in (out / "labels").glob("*.txt")) == ["clip_1.txt", "clip_2.txt", "clip_3.txt"],
                  "save_txt: labels/clip_<frame>.txt")
            vj = json.loads((out / "predictions.json").read_text())
            crops = list((out / "crops").rglob("clip_*.jpg"))
            check(len(vj) > 0 and len(crops) == len(vj), "save_crop on video frames: crops/<class>/clip_<frame>.jpg")
            if plots:
                frames, info = read_video(out / "clip.avi", tmp / "out_frames")
                check(len(frames) == 3 and all(f.shape == (120, 200, 3) for f in frames), f"clip.avi: {info.strip()}")
                for k, fr in enumerate(frames):
                    ref = src_frames[3 * k + 2]  # frames 3, 6, 9: every third, as the reference grabs them
                    inside = np.zeros(fr.shape[:2], bool)
                    for p in (p for p in vj if p["frame"] == k + 1):
                        x, y, w, h = p["bbox"]
                        inside[max(int(y) - 2, 0):int(y + h) + 3, max(int(x) - 2, 0):int(x + w) + 3] = True
                    diff = np.abs(fr - ref).mean(axis=2)
                    check(inside.any() and diff[inside].mean() > 8, f"output frame {k + 1} is annotated at its detections"
                          f" ({diff[inside].mean() if inside.any() else 0:.1f})")
                    # Away from them it is input frame 3k+3, not its neighbours (the background moves).
                    out_diff = [float(np.abs(fr - s).mean(axis=2)[~inside].mean()) for s in src_frames]
                    check((~inside).sum() > 100 and out_diff[3 * k + 2] < 6
                          and out_diff[3 * k + 2] < min(out_diff[3 * k + 1], out_diff[min(3 * k + 3, 9)]),
                          f"output frame {k + 1} is input frame {3 * k + 3} away from its detections "
                          f"({(~inside).sum()} px, {[round(d, 1) for d in out_diff]})")
            # batch=2 on the video: the same outputs.
            lucid([*vbase, f"source={clip}", "name=video2", "vid_stride=3", "batch=2", "save_txt=True", "save_json=True",
                   "save_crop=True"], env)
            a, b = tree_bytes(out), tree_bytes(project / "video2")
            check(a == b, f"batch=2 on the video writes the same {len(a)} files as batch=1")
            # Every frame at batch=1 and batch=8 (a full batch and a partial one): the same detections.
            for batch in (1, 8):
                lucid([*vbase, f"source={clip}", f"name=video_b{batch}", f"batch={batch}", "save_txt=True",
                       "save_json=True"], env)
            a, b = tree_bytes(project / "video_b1"), tree_bytes(project / "video_b8")
            check(len([n for n in a if n.endswith(".txt")]) == 10 and a == b,
                  f"batch=8 on the video's 10 frames writes the same {len(a)} files as batch=1")

            # A broken video beside an image is skipped with a warning; alone it is an error naming it.
            broken = imgs / "broken.mp4"
            broken.write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
            lst.write_text(f"a.jpg\nbroken.mp4\n")
            r = lucid([*base, f"source={lst}", "name=brokenlist", "save=False"], env)
            check("broken.mp4" in r.stderr and "1 of 2 files skipped" in r.stdout and len(lines(r.stdout, "image")) == 1,
                  f"broken video in a list: {r.stderr.strip()}")
            e = lucid([*base, f"source={broken}", "name=broken"], env, expect=1)
            check("broken.mp4" in e.stderr and len(e.stderr.strip().splitlines()) == 1, f"broken video: {e.stderr.strip()}")
    if failures:
        sys.exit(f"{len(failures)} checks failed: {failures}")


if __name__ == "__main__":
    main()
