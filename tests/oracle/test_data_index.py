#!/usr/bin/env python3
"""Data oracle: our dataset index, label checks, image decoding and COCO conversion against the
reference package (ultralytics 8.4.114: verify_image_label, convert_coco; OpenCV's imread).

Agreement required:
- decoding: pixel-exact with cv2.imread(IMREAD_COLOR) (RGB order) for baseline, progressive, gray,
  CMYK and EXIF-oriented JPEGs and PNGs of every colour type and bit depth (tRNS and interlaced too);
- resizing: pixel-exact with cv2.resize(INTER_LINEAR) for down- and up-scaling, halving included;
- prepared images: pixel-exact with the reference dataset's load_image (long side = imgsz);
- labels: the same usable images, classes, boxes (1e-6) and polygons, the same background count,
  on a dataset holding every label problem both implementations treat alike, and on coco128-seg;
- COCO -> Ultralytics labels: the same lines as convert_coco (1e-5), multi-part polygons included.
Known, deliberate differences (not exercised here): truncated JPEGs (the reference rewrites the
file; we skip it), non-integer class ids (we reject), blank lines inside a label file (we ignore
them), BMP/TIFF/WebP images (we decode only JPEG and PNG).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")  # never let the reference try to pip-install plugins

import cv2
import numpy as np
from PIL import Image

from ultralytics.data.converter import convert_coco
from ultralytics.data.utils import img2label_paths, verify_image_label

SOURCE = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("LUCID_BUILD_DIR", SOURCE / "build"))
TOOL = BUILD / "tests" / "data_oracle_tool"
LUCID = BUILD / "lucid"
COCO128 = Path(os.environ.get("LUCID_COCO128", SOURCE.parent / "shared" / "data" / "coco128-seg"))


def run_index(data):
    with tempfile.TemporaryDirectory() as t:
        out = Path(t) / "index.json"
        subprocess.run([str(TOOL), "index", str(data), str(out)], check=True)
        return json.loads(out.read_text())


def reference_labels(images, nc):
    """verify_image_label per image: {path: (cls, boxes, segments)} for usable images, and the
    number of backgrounds (label missing or empty)."""
    usable, backgrounds = {}, 0
    for im, lb in zip(images, img2label_paths(images)):
        im_file, lbl, shape, segments, _, nm, nf, ne, nc_, msg = verify_image_label((im, lb, "", False, nc, 0, 0, False))
        if im_file is None:
            continue
        backgrounds += nm + ne
        usable[im_file] = (lbl, [np.asarray(s, np.float32) for s in segments], shape)
    return usable, backgrounds


def pattern(h, w, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 255 // max(1, w - 1), yy * 255 // max(1, h - 1), (xx * 7 + yy * 13) % 256], -1)
    return (img + rng.integers(-20, 20, img.shape)).clip(0, 255).astype(np.uint8)  # RGB


class DataOracle(unittest.TestCase):
    def compare_index(self, ours_split, images, nc):
        ref, ref_backgrounds = reference_labels(images, nc)
        ours = {im["path"]: im for im in ours_split["images"]}
        self.assertEqual(sorted(ours), sorted(ref), "usable images differ")
        self.assertEqual(ours_split["counts"]["backgrounds"], ref_backgrounds)
        for path, (lbl, segs, shape) in ref.items():
            o = ours[path]
            self.assertEqual((o["height"], o["width"]), tuple(shape), path)
            self.assertEqual(len(o["instances"]), len(lbl), path)
            for k, inst in enumerate(o["instances"]):
                self.assertEqual(inst["cls"], int(lbl[k, 0]), path)
                np.testing.assert_allclose(inst["box"], lbl[k, 1:], atol=1e-6, err_msg=path)
                if segs:
                    self.assertEqual(len(inst["polygons"]), 1)
                    np.testing.assert_array_equal(np.asarray(inst["polygons"][0], np.float32).reshape(-1, 2), segs[k])
                else:
                    self.assertEqual(inst["polygons"], [])

    def test_decode_matches_cv2(self):
        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            img = pattern(37, 53)
            bgr = img[..., ::-1]
            cv2.imwrite(str(t / "q90.jpg"), bgr, [cv2.IMWRITE_JPEG_QUALITY, 90])
            cv2.imwrite(str(t / "q100.jpg"), bgr, [cv2.IMWRITE_JPEG_QUALITY, 100])
            cv2.imwrite(str(t / "prog.jpg"), bgr, [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
            cv2.imwrite(str(t / "gray.jpg"), img[..., 0])
            cv2.imwrite(str(t / "rgb.png"), bgr)
            cv2.imwrite(str(t / "gray.png"), img[..., 1])
            cv2.imwrite(str(t / "g16.png"), (img.astype(np.uint16) * 257)[..., ::-1])
            Image.fromarray(np.dstack([img, img[..., 0]])).save(t / "rgba.png")
            Image.fromarray(img).convert("P").save(t / "pal.png")
            Image.fromarray(img).convert("CMYK").save(t / "cmyk.jpg", quality=95)
            for o in range(1, 9):
                im = Image.fromarray(img)
                exif = im.getexif()
                exif[274] = o
                im.save(t / f"exif{o}.jpg", quality=95, exif=exif)
            files = sorted(p for p in t.iterdir() if p.suffix in {".jpg", ".png"})
            self.assertEqual(len(files), 18)
            for f in files:
                out = t / f"{f.name}.ours.png"
                subprocess.run([str(TOOL), "decode", str(f), str(out)], check=True)
                ours = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
                ref = cv2.imread(str(f), cv2.IMREAD_COLOR)
                self.assertEqual(ours.shape, ref.shape, f.name)
                np.testing.assert_array_equal(ours, ref, err_msg=f.name)

    def test_every_png_colour_type_and_depth_matches_cv2(self):
        """Gray 1..16 bits, RGB, palette, with alpha, with tRNS, interlaced: what cv2.imread(IMREAD_COLOR)
        gives (alpha and transparency dropped, 16 bits cut to their high byte)."""
        from png_cases import png_cases

        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            cases = png_cases()
            self.assertEqual(len(cases), 52)
            for name, data in cases.items():
                f = t / f"{name}.png"
                f.write_bytes(data)
                ref = cv2.imread(str(f), cv2.IMREAD_COLOR)
                self.assertIsNotNone(ref, name)
                out = t / f"{name}.ours.png"
                r = subprocess.run([str(TOOL), "decode", str(f), str(out)], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, f"{name}: {r.stderr.strip()}")
                np.testing.assert_array_equal(cv2.imread(str(out), cv2.IMREAD_UNCHANGED), ref, err_msg=name)

    def test_resize_matches_cv2_inter_linear(self):
        rng = np.random.default_rng(0)
        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            for case in range(12):
                h, w = (int(v) for v in rng.integers(1, 300, 2))
                img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
                if case % 2:
                    img = cv2.GaussianBlur(img, (5, 5), 1.5)
                cv2.imwrite(str(t / "src.png"), img)
                sizes = [tuple(int(v) for v in rng.integers(1, 400, 2)) for _ in range(5)]
                sizes += [(max(1, w // 2), max(1, h // 2)), (2 * w, 2 * h), (640, 640)]
                spec = ",".join(f"{a}x{b}:{t / f'o{i}.png'}" for i, (a, b) in enumerate(sizes))
                subprocess.run([str(TOOL), "resize", str(t / "src.png"), spec], check=True)
                for i, (a, b) in enumerate(sizes):
                    ref = cv2.resize(img, (a, b), interpolation=cv2.INTER_LINEAR)
                    ours = cv2.imread(str(t / f"o{i}.png"), cv2.IMREAD_COLOR)
                    np.testing.assert_array_equal(ours, ref, err_msg=f"{(h, w)} -> {(b, a)}")

    def check_prepared(self, data, img_path, names, imgsz, n):
        from ultralytics.data.dataset import YOLODataset

        ref = YOLODataset(img_path=str(img_path), data={"names": names, "channels": 3}, task="segment", imgsz=imgsz,
                          augment=False, cache=False)
        with tempfile.TemporaryDirectory() as t:
            subprocess.run([str(TOOL), "prepare", str(data), f"{imgsz}:{n}:{t}"], check=True)
            for i in range(min(n, len(ref.im_files))):
                want, _, _ = ref.load_image(i)
                ours = cv2.imread(str(Path(t) / f"{i}.png"), cv2.IMREAD_COLOR)
                np.testing.assert_array_equal(ours, want, err_msg=f"{ref.im_files[i]} at imgsz {imgsz}")

    @unittest.skipUnless(COCO128.is_dir(), f"{COCO128} not present")
    def test_prepared_images_match_load_image(self):
        names = {i: str(i) for i in range(80)}
        with tempfile.TemporaryDirectory() as t:
            # A mirror of symlinks: the reference dataset writes its label cache beside the label
            # folder, which must not land in the shared fixture.
            mirror = Path(t)
            for sub in ("images", "labels"):
                (mirror / sub).mkdir()
                os.symlink(COCO128 / sub / "train2017", mirror / sub / "train2017")
            os.symlink(COCO128 / "classes.txt", mirror / "classes.txt")
            self.check_prepared(mirror, mirror / "images" / "train2017", names, 320, 24)
            self.check_prepared(mirror, mirror / "images" / "train2017", names, 640, 8)
        with tempfile.TemporaryDirectory() as t:
            subprocess.run([str(LUCID), "data", "synth", f"out={t}", "n_train=6", "n_val=1", "imgsz=200"], check=True,
                           capture_output=True)
            self.check_prepared(Path(t) / "data.yaml", Path(t) / "images" / "train", {0: "a", 1: "b", 2: "c"}, 640, 6)

    def test_label_checks_match_verify_image_label(self):
        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            (t / "images").mkdir()
            (t / "labels").mkdir()
            tri = "0 0.1 0.1 0.5 0.1 0.5 0.5\n"
            cases = {
                "good": tri + "2 0.6 0.6 0.9 0.6 0.9 0.9 0.6 0.9\n",
                "boxes": "1 0.5 0.5 0.2 0.2\n2 0.25 0.75 0.1 0.3\n",
                "empty": "",
                "blank": "\n\n",
                "dup": "2 0.5 0.5 0.7 0.5 0.7 0.7\n" + tri + tri + "1 0.5 0.5 0.7 0.5 0.7 0.7\n",
                "dup_box": "1 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n0 0.1 0.1 0.1 0.1\n",
                "two_points": tri + "1 0.2 0.2 0.3 0.3\n",
                "one_point": tri + "1 0.2 0.2\n",
                "odd": tri + "0 0.1 0.1 0.2\n",
                "cls_only": tri + "1\n",
                "negcls": "-1 0.5 0.5 0.1 0.1\n",
                "bigcls": "0 0.5 0.5 0.1 0.1\n3 0.5 0.5 0.1 0.1\n",
                "nonnum": "0 0.5 0.5 0.1 zero\n",
                "nan": "0 0.5 nan 0.1 0.1\n",
                "inf": "0 0.5 0.5 inf 0.1\n",
                "oob": "0 0.5 0.5 1.2 0.1\n",
                "edge_ok": "0 0.5 0.5 1.01 0.2\n0 -0.01 0.5 0.01 0.2\n",
                "poly_oob": "0 0.1 0.1 1.5 0.1 1.5 0.5\n",
                "poly_extent_ok": "0 0.9 0.1 1.05 0.1 1.05 0.5\n",
                "six": "0 0.5 0.5 0.1 0.1 0.3\n",
                "four": "0 0.5 0.5 0.1\n",
                "crlf": "1 0.5 0.5 0.2 0.2\r\n0 0.1 0.1 0.1 0.1\r\n",
                "plus": "+1 +0.5 0.5 .2 4e-1\n",
            }
            for i, (name, text) in enumerate(cases.items()):
                cv2.imwrite(str(t / "images" / f"{name}.jpg"), pattern(32 + i, 48, i)[..., ::-1])
                (t / "labels" / f"{name}.txt").write_bytes(text.encode())
            cv2.imwrite(str(t / "images" / "nolabel.jpg"), pattern(30, 30)[..., ::-1])
            cv2.imwrite(str(t / "images" / "tiny.jpg"), pattern(8, 8)[..., ::-1])
            (t / "labels" / "tiny.txt").write_text(tri)
            (t / "images" / "text.jpg").write_text("not an image")
            png = bytearray(cv2.imencode(".png", pattern(32, 32)[..., ::-1])[1].tobytes())
            png[len(png) // 2] ^= 0x5A
            (t / "images" / "corrupt.png").write_bytes(bytes(png))
            im = Image.fromarray(pattern(20, 40))
            exif = im.getexif()
            exif[274] = 6
            im.save(t / "images" / "rotated.jpg", quality=95, exif=exif)
            (t / "labels" / "rotated.txt").write_text("2 0.5 0.5 0.2 0.2\n")
            (t / "data.yaml").write_text("train: images\nval: images\nnames: [a, b, c]\n")

            ours = run_index(t / "data.yaml")["splits"][0]
            images = sorted(str(p) for p in (t / "images").iterdir())
            self.compare_index(ours, images, 3)
            # two_points (a box row beside a polygon) is refused since 8.4.190, as the reference does.
            self.assertEqual(ours["counts"]["images"], 13, json.dumps(ours["problems"], indent=1))

    @unittest.skipUnless(COCO128.is_dir(), f"{COCO128} not present")
    def test_coco128_matches_verify_image_label(self):
        ours = run_index(COCO128)
        split = ours["splits"][0]
        images = sorted(str(p) for p in (COCO128 / "images" / "train2017").iterdir())
        self.compare_index(split, images, 80)
        c = split["counts"]
        self.assertEqual((c["images"], c["instances"], c["backgrounds"], c["orphan_labels"]), (128, 929, 2, 2))
        out = subprocess.run([str(LUCID), "data", "check", f"data={COCO128}"], check=True, capture_output=True, text=True)
        self.assertIn("train2017: 128 images, 929 instances, 2 background images, 0 skipped files, 2 orphan label files",
                      out.stdout)

    def test_coco_to_labels_matches_convert_coco(self):
        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            subprocess.run([str(LUCID), "data", "synth", f"out={t / 'synth'}", "n_train=6", "n_val=2", "imgsz=96"],
                           check=True, capture_output=True)
            # Add multi-part polygons and a crowd annotation to the synthetic COCO file.
            doc = json.loads((t / "synth" / "annotations" / "instances_val.json").read_text())
            w, h = doc["images"][0]["width"], doc["images"][0]["height"]
            nid = max(a["id"] for a in doc["annotations"]) + 1
            doc["annotations"] += [
                {"id": nid, "image_id": doc["images"][0]["id"], "category_id": 2, "iscrowd": 0, "bbox": [2, 2, 40, 20],
                 "segmentation": [[2, 2, 12, 2, 12, 12, 2, 12], [20, 3, 30, 3, 25, 10], [35, 15, 42, 15, 42, 22, 35, 22, 33, 18]]},
                {"id": nid + 1, "image_id": doc["images"][0]["id"], "category_id": 1, "iscrowd": 1, "bbox": [0, 0, w, h],
                 "segmentation": {"size": [h, w], "counts": [w * h]}},
            ]
            src = t / "coco"
            (src / "annotations").mkdir(parents=True)
            (src / "annotations" / "instances_val.json").write_text(json.dumps(doc))
            (src / "images").mkdir()
            os.symlink(t / "synth" / "images" / "val", src / "images" / "val")
            subprocess.run([str(LUCID), "data", "convert", f"data={src / 'annotations' / 'instances_val.json'}",
                            f"out={t / 'ours'}"], check=True, capture_output=True)
            convert_coco(str(src / "annotations"), str(t / "ref"), use_segments=True, cls91to80=False)
            ref_dir = t / "ref" / "labels" / "val"
            ref_files = sorted(ref_dir.glob("*.txt"))
            self.assertGreater(len(ref_files), 0)
            for rf in ref_files:
                ours_file = t / "ours" / "labels" / "val" / rf.name
                ref_rows = sorted([list(map(float, line.split())) for line in rf.read_text().splitlines() if line.strip()])
                text = ours_file.read_text() if ours_file.exists() else ""  # we write no file for no lines
                our_rows = sorted([list(map(float, line.split())) for line in text.splitlines() if line.strip()])
                self.assertEqual(len(our_rows), len(ref_rows), rf.name)
                for a, b in zip(our_rows, ref_rows):
                    self.assertEqual(len(a), len(b), rf.name)
                    np.testing.assert_allclose(a, b, atol=1e-5, err_msg=rf.name)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
