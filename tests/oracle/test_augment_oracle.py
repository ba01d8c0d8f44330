"""Augmentation oracle: our data pipeline against the reference package's (ultralytics).

1. Validation path on coco128-seg (images/train2017 + labels/train2017): ultralytics YOLODataset with
   augment=False, rect batches (pad 0.5, stride 32), overlap masks, against our loader (prepared-image
   resize, rect batch shapes, letterbox, polygon resampling, mask targets), fed the same decoded
   images (cv2.imread) and the reference's parsed labels. Asserts per image: letterboxed pixels within
   1 grey level, boxes within 1 px, per instance mask agreement >= 99.5 % (|ours xor ref| over
   |ours or ref| of the instance's pixels in the overlap map), semantic map agreement.
2. Pieces with fixed parameters against the reference code they mirror: cv2.fillPoly (exact),
   polygon2mask at 1/4 (exact), ops.segment2box, cv2.resize and cv2.warpAffine (pixel differences
   reported, within 1 grey level), RandomHSV with fixed gains, RandomPerspective.apply_instances with a
   fixed matrix, Mosaic with a fixed centre.

Skips (exit 0) when /work/shared/data is missing."""
import os
import random
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import cv2
import numpy as np
import torch
from safetensors.torch import load_file, save_file

warnings.filterwarnings("ignore")

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", SOURCE_DIR / "build"))
TOOL = BUILD_DIR / "tests" / "augment_oracle_tool"
DATA = Path(os.environ.get("LUCID_SHARED_DATA", "/work/shared/data")) / "coco128-seg"
IMGSZ = 640
BATCH = 16


def run_tool(mode, inputs, tmp):
    src, dst = tmp / f"{mode}_in.safetensors", tmp / f"{mode}_out.safetensors"
    save_file({k: (v if isinstance(v, torch.Tensor) else torch.as_tensor(v)).contiguous().clone() for k, v in inputs.items()}, src)
    r = subprocess.run([str(TOOL), mode, str(src), str(dst)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"augment_oracle_tool {mode} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return load_file(dst)


def pack_instances(d, prefix, cls, polys, boxes):
    d[prefix + "cls"] = torch.tensor(np.asarray(cls, dtype=np.int32).reshape(-1))
    d[prefix + "plen"] = torch.tensor(np.asarray([len(p) for p in polys], dtype=np.int32).reshape(-1))
    flat = np.concatenate([np.asarray(p, np.float32).reshape(-1) for p in polys]) if len(polys) else np.zeros(0, np.float32)
    d[prefix + "poly"] = torch.tensor(flat.astype(np.float32))
    d[prefix + "box"] = torch.tensor(np.asarray(boxes, np.float32).reshape(-1, 4))


def unpack_instances(out, prefix):
    cls = out[prefix + "cls"].numpy()
    plen = out[prefix + "plen"].numpy()
    flat = out[prefix + "poly"].numpy()
    polys, off = [], 0
    for n in plen:
        polys.append(flat[off : off + 2 * n].reshape(-1, 2))
        off += 2 * n
    return cls, polys, out[prefix + "box"].numpy().reshape(-1, 4)


class Report:
    def __init__(self):
        self.failures = []
        self.lines = []

    def check(self, ok, msg):
        if not ok:
            self.failures.append(msg)

    def note(self, msg):
        self.lines.append(msg)
        print(msg)


# ---- 1. validation path ----------------------------------------------------------------------------


def reference_dataset(tmp, overlap):
    from ultralytics.cfg import get_cfg
    from ultralytics.data.dataset import YOLODataset

    # The reference writes a labels cache beside the label folder: keep it in tmp via symlinks.
    (tmp / "images").mkdir(exist_ok=True)
    (tmp / "labels").mkdir(exist_ok=True)
    for kind in ("images", "labels"):
        link = tmp / kind / "train2017"
        if not link.exists():
            link.symlink_to(DATA / kind / "train2017", target_is_directory=True)
    names = (DATA / "classes.txt").read_text().split("\n")
    names = [n for n in names if n.strip()]
    yaml_path = tmp / "data.yaml"
    yaml_path.write_text(
        f"path: {tmp}\ntrain: images/train2017\nval: images/train2017\nnames:\n"
        + "".join(f"  {i}: {n}\n" for i, n in enumerate(names))
    )
    cfg = get_cfg()
    cfg.overlap_mask = overlap
    data = {"names": dict(enumerate(names)), "nc": len(names), "channels": 3}
    return YOLODataset(
        img_path=str(tmp / "images" / "train2017"),
        imgsz=IMGSZ,
        batch_size=BATCH,
        augment=False,
        hyp=cfg,
        rect=True,
        cache=False,
        single_cls=False,
        stride=32,
        pad=0.5,
        prefix="",
        task="segment",
        classes=None,
        data=data,
        fraction=1.0,
    )


def match_instances(ours_cls, ours_box, ref_cls, ref_box):
    """Pairs each reference instance with an unused one of ours of the same class, nearest box."""
    used, pairs = set(), []
    for k in range(len(ref_cls)):
        best, best_d = None, None
        for j in range(len(ours_cls)):
            if j in used or int(ours_cls[j]) != int(ref_cls[k]):
                continue
            d = float(np.abs(ours_box[j] - ref_box[k]).max())
            if best_d is None or d < best_d:
                best, best_d = j, d
        pairs.append(best)
        if best is not None:
            used.add(best)
    return pairs


def check_validation(tmp, rep, overlap=True, areas=None):
    """Returns, per image, the reference's (class, box, mask area) of each instance (per-instance
    mode); in overlap mode `areas` (from the per-instance run) identifies instances of equal area,
    whose order, and so the owner of their shared pixels, numpy's unstable argsort leaves open."""
    ds = reference_dataset(tmp, overlap)
    found = {}
    n = len(ds)
    # Our inputs: the decoded image (cv2.imread, to RGB) and the reference's parsed labels.
    inputs = {"cfg.imgsz": torch.tensor(IMGSZ), "cfg.n": torch.tensor(n), "cfg.batch": torch.tensor(BATCH),
              "cfg.workers": torch.tensor(3), "cfg.rect": torch.tensor(1), "cfg.overlap": torch.tensor(int(overlap))}
    files = []
    for i in range(n):
        lab = ds.labels[i]
        files.append(lab["im_file"])
        img = cv2.imread(lab["im_file"])
        inputs[f"img.{i}"] = torch.from_numpy(np.ascontiguousarray(img[:, :, ::-1]))
        segs = lab["segments"]
        boxes = lab["bboxes"].astype(np.float32)  # normalised xywh
        xyxy = np.concatenate([boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2], 1).astype(np.float32)
        pack_instances(inputs, f"lab.{i}.", lab["cls"].reshape(-1).astype(np.int32), segs, xyxy)
    out = run_tool("val", inputs, tmp)

    worst_px = worst_box = 0.0
    worst_mask = 1.0
    n_ties = 0
    sem_agree_min = 1.0
    n_inst = n_exact = 0
    mode = "overlap" if overlap else "per-instance"
    for i in range(n):
        ref = ds[i]
        name = Path(files[i]).name
        assert ref["im_file"] == files[i]
        ref_img = ref["img"].numpy().astype(np.int32)
        our_img = out[f"img.{i}"].numpy().astype(np.int32)
        if ref_img.shape != our_img.shape:
            rep.check(False, f"{name}: image {our_img.shape} vs reference {ref_img.shape}")
            continue
        d = np.abs(ref_img - our_img).max() if ref_img.size else 0
        worst_px = max(worst_px, d)
        rep.check(d <= 1, f"{name}: letterboxed pixels differ by {d} > 1")
        H, W = ref_img.shape[1:]
        scale = np.array([W, H, W, H], np.float64)
        ref_box, our_box = ref["bboxes"].numpy().astype(np.float64) * scale, out[f"bboxes.{i}"].numpy().astype(np.float64) * scale
        ref_cls, our_cls = ref["cls"].numpy().reshape(-1), out[f"cls.{i}"].numpy().reshape(-1)
        if len(ref_cls) != len(our_cls):
            rep.check(False, f"{name}: {len(our_cls)} instances vs reference {len(ref_cls)}")
            continue
        pairs = match_instances(our_cls, our_box, ref_cls, ref_box)
        ref_masks, our_masks = ref["masks"].numpy(), out[f"masks.{i}"].numpy()
        if not overlap:
            found[name] = [(int(ref_cls[k]), ref_box[k], int(ref_masks[k].sum())) for k in range(len(ref_cls))]
        ref_area = None
        if overlap and areas is not None and name in areas:
            known = areas[name]
            idx = match_instances([c for c, _, _ in known], np.array([b for _, b, _ in known]).reshape(-1, 4), ref_cls, ref_box)
            ref_area = [known[t][2] if t is not None else -1 for t in idx]
        for k, j in enumerate(pairs):
            if j is None:
                rep.check(False, f"{name}: reference instance {k} (class {int(ref_cls[k])}) unmatched")
                continue
            n_inst += 1
            bd = float(np.abs(ref_box[k] - our_box[j]).max())
            worst_box = max(worst_box, bd)
            rep.check(bd <= 1.0, f"{name}: instance {k} box differs by {bd:.3f} px")
            if overlap:
                rm, om = ref_masks[0] == k + 1, our_masks == j + 1
            else:
                rm, om = ref_masks[k] > 0, our_masks[j] > 0
            union = np.logical_or(rm, om).sum()
            agree = 1.0 - np.logical_xor(rm, om).sum() / max(union, 1)
            if agree < 0.995 and ref_area is not None and ref_area[k] >= 0:
                # Equal-area instances: compare the union over the group of equal area.
                group = [t for t in range(len(ref_cls)) if ref_area[t] == ref_area[k] and pairs[t] is not None]
                if len(group) > 1:
                    rg = np.isin(ref_masks[0], [t + 1 for t in group])
                    og = np.isin(our_masks, [pairs[t] + 1 for t in group])
                    ga = 1.0 - np.logical_xor(rg, og).sum() / max(np.logical_or(rg, og).sum(), 1)
                    if ga >= 0.995:
                        n_ties += 1
                        agree = ga
            n_exact += int(agree == 1.0)
            worst_mask = min(worst_mask, agree)
            rep.check(agree >= 0.995, f"{name}: instance {k} mask agreement {agree:.4f} < 0.995")
        # Semantic map: where an instance is present the class must agree.
        ref_sem, our_sem = ref["sem_masks"].numpy(), out[f"sem.{i}"].numpy()
        present = (ref_masks[0] > 0) if overlap else (ref_masks.sum(0) > 0) if len(ref_masks) else np.zeros_like(ref_sem, bool)
        if present.any():
            sa = float((ref_sem[present] == our_sem[present]).mean())
            sem_agree_min = min(sem_agree_min, sa)
            rep.check(sa >= 0.995, f"{name}: semantic map agreement {sa:.4f}")
    rep.note(
        f"validation ({mode} masks): {n} images, {n_inst} instances; worst pixel difference {worst_px}, "
        f"worst box difference {worst_box:.4f} px, worst mask agreement {worst_mask:.4f} "
        f"({n_exact}/{n_inst} masks identical; {n_ties} compared as groups of equal area), "
        f"worst semantic agreement {sem_agree_min:.4f}"
    )
    return found


# ---- 2. pieces -----------------------------------------------------------------------------------


def random_polygon(rng, w, h, n, margin=20):
    cx, cy = rng.uniform(-margin, w + margin), rng.uniform(-margin, h + margin)
    rad = rng.uniform(2, max(w, h) / 2)
    ang = np.sort(rng.uniform(0, 2 * np.pi, n)) if rng.random() < 0.7 else rng.uniform(0, 2 * np.pi, n)
    r = rad * rng.uniform(0.2, 1.0, n)
    return np.stack([cx + r * np.cos(ang), cy + r * np.sin(ang)], 1).astype(np.float32)


class _TileSet:
    """The little of a dataset that Mosaic needs: four fixed tiles."""

    cache = "ram"
    buffer = []

    def __init__(self, labels):
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def get_image_and_label(self, i):
        return self.labels[i]


def _raster_cases(rng, inputs, expect):
    """fillPoly, polygon2mask and segment2box cases."""
    from ultralytics.data.utils import polygon2mask
    from ultralytics.utils.ops import segment2box

    # fillPoly on integer polygons, including vertices outside the image and at its far edge.
    for c in range(400):
        h, w = int(rng.integers(8, 80)), int(rng.integers(8, 80))
        poly = random_polygon(rng, w, h, int(rng.integers(3, 40)))
        if c % 2:
            poly[:, 0] = poly[:, 0].clip(0, w)
            poly[:, 1] = poly[:, 1].clip(0, h)
        xy = poly.astype(np.int32)
        ref = np.zeros((h, w), np.uint8)
        cv2.fillPoly(ref, [xy], color=1)
        inputs[f"fill.{c}.shape"] = torch.tensor([h, w])
        inputs[f"fill.{c}.xy"] = torch.from_numpy(xy.reshape(-1).copy())
        expect[f"fill.{c}.out"] = ref
    # polygon2mask at 1/4 on float polygons clipped to the image (as after perspective).
    for c in range(200):
        h, w = 4 * int(rng.integers(4, 40)), 4 * int(rng.integers(4, 40))
        poly = random_polygon(rng, w, h, int(rng.integers(3, 300)))
        poly[:, 0] = poly[:, 0].clip(0, w)
        poly[:, 1] = poly[:, 1].clip(0, h)
        inputs[f"mask.{c}.shape"] = torch.tensor([h, w, 4])
        inputs[f"mask.{c}.poly"] = torch.from_numpy(poly.reshape(-1).copy())
        expect[f"mask.{c}.out"] = polygon2mask((h, w), [poly.reshape(-1)], color=1, downsample_ratio=4)
    # segment2box.
    for c in range(300):
        w, h = int(rng.integers(20, 100)), int(rng.integers(20, 100))
        poly = random_polygon(rng, w, h, int(rng.integers(3, 30)), margin=40)
        inputs[f"box.{c}.poly"] = torch.from_numpy(poly.reshape(-1).copy())
        inputs[f"box.{c}.size"] = torch.tensor([w, h], dtype=torch.float64)
        expect[f"box.{c}.out"] = segment2box(poly.copy(), w, h)


def _image_cases(rng, inputs, expect):
    """resize, warpAffine, warpPerspective and HSV cases."""
    from ultralytics.data.augment import RandomHSV

    # resize and warpAffine on random images.
    for c in range(20):
        h, w = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if c % 2:
            img = cv2.GaussianBlur(img, (7, 7), 2)  # smooth content, like photographs
        oh, ow = (h // 2, w // 2) if c == 0 else (int(rng.integers(10, 300)), int(rng.integers(10, 300)))
        inputs[f"resize.{c}.img"] = torch.from_numpy(img)
        inputs[f"resize.{c}.shape"] = torch.tensor([oh, ow])
        expect[f"resize.{c}.out"] = cv2.resize(img, (ow, oh), interpolation=cv2.INTER_LINEAR)
        # Odd cases without rotation (the training default: scale and translation only).
        ang, s = (rng.uniform(-30, 30) if c % 2 == 0 else 0.0), rng.uniform(0.5, 1.5)
        R = cv2.getRotationMatrix2D((w / 2, h / 2), ang, s)
        R[:, 2] += rng.uniform(-20, 20, 2)
        M = np.vstack([R, [0, 0, 1]]).astype(np.float32)  # the reference keeps M in float32
        oh, ow = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        inputs[f"warp.{c}.img"] = torch.from_numpy(img)
        inputs[f"warp.{c}.M"] = torch.from_numpy(M.astype(np.float64))
        inputs[f"warp.{c}.shape"] = torch.tensor([oh, ow])
        inputs[f"warp.{c}.perspective"] = torch.tensor(0)
        expect[f"warp.{c}.out"] = cv2.warpAffine(img, M[:2], dsize=(ow, oh), borderValue=(114, 114, 114, 114))
        P = M.copy()
        P[2, :2] = rng.uniform(-0.001, 0.001, 2)
        inputs[f"warpp.{c}.img"] = torch.from_numpy(img)
        inputs[f"warpp.{c}.M"] = torch.from_numpy(P.astype(np.float64))
        inputs[f"warpp.{c}.shape"] = torch.tensor([oh, ow])
        expect[f"warpp.{c}.out"] = cv2.warpPerspective(img, P, dsize=(ow, oh), borderValue=(114, 114, 114, 114))
    # HSV with fixed gains (RandomHSV draws U(-1, 1)^3 from numpy's global generator).
    G = np.asarray([0.015, 0.7, 0.4])
    for c in range(10):
        img = rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)
        u = rng.uniform(-1, 1, 3) if c else np.zeros(3)
        orig_uniform = np.random.uniform
        np.random.uniform = lambda *a, **k: u
        try:
            bgr = np.ascontiguousarray(img[:, :, ::-1])
            RandomHSV(*G).apply_image({"img": bgr})
        finally:
            np.random.uniform = orig_uniform
        inputs[f"hsv.{c}.img"] = torch.from_numpy(img)
        inputs[f"hsv.{c}.gains"] = torch.tensor(u * [0.015, 0.7, 0.4], dtype=torch.float64)
        expect[f"hsv.{c}.out"] = bgr[:, :, ::-1].copy()


def _perspective_cases(rng, inputs):
    """RandomPerspective.apply_instances cases: (case, kept classes, boxes, segments) of the reference."""
    from ultralytics.data.augment import RandomPerspective
    from ultralytics.utils.instance import Instances

    # RandomPerspective.apply_instances with a fixed matrix.
    persp_cases = []
    for c in range(30):
        h, w = int(rng.integers(100, 300)), int(rng.integers(100, 300))
        n = int(rng.integers(1, 6))
        segs = [random_polygon(rng, w, h, 40, margin=0) for _ in range(n)]
        segs = np.stack([np.clip(s, [0, 0], [w, h]) for s in segs]).astype(np.float32)
        boxes = np.stack([np.concatenate([s.min(0), s.max(0)]) for s in segs]).astype(np.float32)
        rp = RandomPerspective(degrees=20, translate=0.1, scale=0.5, shear=5, size=(160, 128))
        random.seed(c)
        M, scale = rp._compute_affine_matrix(np.zeros((h, w, 3), np.uint8), (160, 128))
        labels = {"cls": np.arange(n).reshape(-1, 1).astype(np.float32),
                  "instances": Instances(boxes.copy(), segs.copy(), None, bbox_format="xyxy", normalized=False)}
        res = rp.apply_instances(labels, {"M": M, "scale": scale, "orig_shape": (h, w), "size": (160, 128)})
        inputs[f"perspective.{c}.img"] = torch.zeros((h, w, 3), dtype=torch.uint8)
        inputs[f"perspective.{c}.M"] = torch.from_numpy(M.astype(np.float64))
        inputs[f"perspective.{c}.scale"] = torch.tensor(float(scale), dtype=torch.float64)
        inputs[f"perspective.{c}.shape"] = torch.tensor([128, 160])
        pack_instances(inputs, f"perspective.{c}.", np.arange(n), list(segs), boxes)
        persp_cases.append((c, res["cls"].reshape(-1).astype(int), res["instances"].bboxes, res["instances"].segments))
    return persp_cases


def _mosaic_cases(rng, inputs):
    """Mosaic cases: (case, canvas, kept classes, boxes, segments) of the reference."""
    from ultralytics.data.augment import Mosaic
    from ultralytics.utils.instance import Instances

    # Mosaic with a fixed centre.
    mosaic_cases = []
    for c in range(10):
        s = 64
        tiles, ref_labels = [], []
        for t in range(4):
            h, w = int(rng.integers(30, 65)), int(rng.integers(30, 65))
            img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            n = int(rng.integers(0, 4))
            segs = np.stack([np.clip(random_polygon(rng, w, h, 20, 0), [0, 0], [w, h]) for _ in range(n)]).astype(np.float32) if n else np.zeros((0, 20, 2), np.float32)
            boxes = np.stack([np.concatenate([q.min(0), q.max(0)]) for q in segs]).astype(np.float32) if n else np.zeros((0, 4), np.float32)
            tiles.append((img, segs, boxes))
            pack_instances(inputs, f"mosaic.{c}.{t}.", np.arange(n) + 10 * t, list(segs), boxes)
            inputs[f"mosaic.{c}.{t}.img"] = torch.from_numpy(img)
            ref_labels.append({"img": img, "resized_shape": (h, w), "cls": (np.arange(n) + 10 * t).reshape(-1, 1).astype(np.float32),
                               "instances": Instances(boxes.copy(), segs.copy(), None, bbox_format="xyxy", normalized=False),
                               "im_file": "x", "ori_shape": (h, w)})
        xc, yc = int(rng.integers(32, 96)), int(rng.integers(32, 96))
        inputs[f"mosaic.{c}.centre"] = torch.tensor([xc, yc])
        inputs[f"mosaic.{c}.imgsz"] = torch.tensor(s)

        mo = Mosaic(_TileSet(ref_labels), imgsz=s, p=1.0)
        mo.get_indexes = lambda: [1, 2, 3]
        labels = ref_labels[0]
        centre = iter([yc + 0.25, xc + 0.25])  # get_params draws yc, then xc, and truncates
        orig_uniform = random.uniform
        random.uniform = lambda a, b: next(centre)
        try:
            params = mo.get_params(labels)
        finally:
            random.uniform = orig_uniform
        res = mo.apply_image(labels, params)
        res = mo.apply_instances(res, params)
        mosaic_cases.append((c, res["img"], res["cls"].reshape(-1).astype(int), res["instances"].bboxes, res["instances"].segments))
    return mosaic_cases


def compare_exact(out, expect, rep, kind):
    keys = [k for k in expect if k.startswith(kind + ".")]
    bad = 0
    for k in keys:
        ours, ref = out[k].numpy(), expect[k]
        if ours.shape != ref.shape or not np.array_equal(ours, ref):
            bad += 1
            if bad <= 3:
                diff = int((ours != ref).sum()) if ours.shape == ref.shape else -1
                rep.check(False, f"{k}: differs from the reference ({diff} pixels)")
    rep.check(bad == 0, f"{kind}: {bad}/{len(keys)} cases differ")
    rep.note(f"{kind}: {len(keys) - bad}/{len(keys)} cases identical")


def _check_rasters(out, expect, rep):
    compare_exact(out, expect, rep, "fill")
    compare_exact(out, expect, rep, "mask")
    worst = max(float(np.abs(out[k].numpy() - expect[k]).max()) for k in expect if k.startswith("box."))
    rep.check(worst <= 1e-3, f"segment2box: worst difference {worst}")
    rep.note(f"segment2box: 300 cases, worst difference {worst:.2e}")


def _check_images(out, expect, rep):
    for kind in ("resize", "warp", "warpp", "hsv"):
        keys = [k for k in expect if k.startswith(kind + ".")]
        worst, frac = 0, 0.0
        for k in keys:
            ours, ref = out[k].numpy().astype(int), expect[k].astype(int)
            if ours.shape != ref.shape:
                rep.check(False, f"{k}: shape {ours.shape} vs {ref.shape}")
                continue
            d = np.abs(ours - ref)
            worst = max(worst, int(d.max()))
            frac = max(frac, float((d > 0).mean()))
        if kind != "warpp":  # perspective (off by default): reported only
            rep.check(worst <= 1, f"{kind}: worst pixel difference {worst} > 1")
        rep.note(f"{kind}: {len(keys)} cases, worst pixel difference {worst}, at most {100 * frac:.3f} % of values differ")


def _check_perspective(out, persp_cases, rep):
    worst_b = worst_p = 0.0
    for c, cls, boxes, segs in persp_cases:
        ocls, opolys, oboxes = unpack_instances(out, f"perspective.{c}.out.")
        if list(ocls) != list(cls):
            rep.check(False, f"perspective.{c}: kept {list(ocls)} vs reference {list(cls)}")
            continue
        if len(cls):
            worst_b = max(worst_b, float(np.abs(oboxes - boxes).max()))
            worst_p = max(worst_p, max(float(np.abs(p - s).max()) for p, s in zip(opolys, segs)))
    rep.check(worst_b <= 1e-2 and worst_p <= 1e-2, f"perspective: boxes {worst_b}, polygons {worst_p}")
    rep.note(f"perspective instances: {len(persp_cases)} cases, worst box difference {worst_b:.2e}, polygon {worst_p:.2e}")


def _check_mosaic(out, mosaic_cases, rep):
    worst_b = 0.0
    for c, img, cls, boxes, segs in mosaic_cases:
        ours = out[f"mosaic.{c}.img_out"].numpy()
        rep.check(np.array_equal(ours, img), f"mosaic.{c}: canvas differs")
        ocls, opolys, oboxes = unpack_instances(out, f"mosaic.{c}.out.")
        if list(ocls) != list(cls):
            rep.check(False, f"mosaic.{c}: kept {list(ocls)} vs reference {list(cls)}")
            continue
        if len(cls):
            worst_b = max(worst_b, float(np.abs(oboxes - boxes).max()))
            worst_b = max(worst_b, max(float(np.abs(p - s).max()) for p, s in zip(opolys, segs)))
    rep.check(worst_b <= 1e-4, f"mosaic: labels differ by {worst_b}")
    rep.note(f"mosaic: {len(mosaic_cases)} cases, canvases compared exactly, worst label difference {worst_b:.2e}")


def check_pieces(tmp, rep):
    rng = np.random.default_rng(0)
    inputs, expect = {}, {}
    _raster_cases(rng, inputs, expect)
    _image_cases(rng, inputs, expect)
    persp_cases = _perspective_cases(rng, inputs)
    mosaic_cases = _mosaic_cases(rng, inputs)
    out = run_tool("pieces", inputs, tmp)
    _check_rasters(out, expect, rep)
    _check_images(out, expect, rep)
    _check_perspective(out, persp_cases, rep)
    _check_mosaic(out, mosaic_cases, rep)


def main():
    if not DATA.exists():
        print(f"SKIP: {DATA} not found")
        return 0
    if not TOOL.exists():
        sys.exit(f"{TOOL} not built")
    rep = Report()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        check_pieces(tmp, rep)
        areas = check_validation(tmp, rep, overlap=False)
        check_validation(tmp, rep, overlap=True, areas=areas)
    if rep.failures:
        sys.exit("FAILED:\n" + "\n".join(rep.failures[:50]))
    print("augment oracle: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
