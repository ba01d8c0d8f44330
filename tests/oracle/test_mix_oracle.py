"""Mix augmentation oracle: our copy_paste (flip and mixup modes), mixup and cutmix against the
reference package's CopyPaste, MixUp and CutMix (ultralytics.data.augment) on the same inputs with
their random draws fixed: the reference's draws (random.uniform / randint, np.random.beta / randint /
choice) are replaced by the values our tool is given, the partner image is the one both are given.
Asserts per case: images within 1 grey level, the same instances in the same order (classes), boxes
within 1 px, per-instance masks at 1/4 (the reference's Format, mask_overlap=False) agreeing on at
least 99.5 % of the union of their pixels.

np.argsort, which orders the copy_paste candidates by their largest IoA, is the stable sort here:
numpy's default sort leaves the order of equal IoAs (common: every candidate overlapping nothing has
0) to its SIMD implementation, where ours keeps candidate order."""
import random
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_augment_oracle import TOOL, Report, pack_instances, random_polygon, run_tool, unpack_instances  # noqa: E402

warnings.filterwarnings("ignore")

POINTS = 24  # polygon points per instance (one count per case, as the reference's Instances)


def scene(rng, h, w, n, tag):
    """A smooth random image and n polygon instances (boxes = polygon extent) inside it."""
    import cv2

    img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 1.5)
    img[..., 2] = tag
    segs, boxes = [], []
    for _ in range(n):
        rad = rng.uniform(3, max(4, min(h, w) / 4))
        cx, cy = rng.uniform(rad, w - rad), rng.uniform(rad, h - rad)
        ang = np.sort(rng.uniform(0, 2 * np.pi, POINTS))
        r = rad * rng.uniform(0.5, 1.0, POINTS)
        poly = np.stack([cx + r * np.cos(ang), cy + r * np.sin(ang)], 1).clip([0, 0], [w, h]).astype(np.float32)
        segs.append(poly)
        boxes.append(np.concatenate([poly.min(0), poly.max(0)]))
    segs = np.stack(segs).astype(np.float32) if n else np.zeros((0, POINTS, 2), np.float32)
    boxes = np.stack(boxes).astype(np.float32) if n else np.zeros((0, 4), np.float32)
    cls = rng.integers(0, 5, n).astype(np.int32)
    return img, cls, segs, boxes


def labels_of(img, cls, segs, boxes):
    from ultralytics.utils.instance import Instances

    return {"img": img.copy(), "cls": cls.reshape(-1, 1).astype(np.float32),
            "instances": Instances(boxes.copy(), segs.copy(), None, bbox_format="xyxy", normalized=False),
            "im_file": "x", "ori_shape": img.shape[:2], "resized_shape": img.shape[:2]}


class _Partner:
    """The little of a dataset that the mix transforms need: one partner sample."""

    def __init__(self, labels):
        self.labels = labels

    def __len__(self):
        return 1

    def get_image_and_label(self, i):
        return {k: (v.copy() if hasattr(v, "copy") else v) for k, v in self.labels.items()}


class fixed_draws:
    """Replaces the reference's random draws for the duration of a call."""

    def __init__(self, beta=(), randint=(), choice=None):
        self.beta, self.randint, self.choice = list(beta), list(randint), choice

    def __enter__(self):
        self.saved = (random.uniform, random.randint, np.random.beta, np.random.randint, np.random.choice, np.argsort)
        random.uniform = lambda a, b: a  # BaseMixTransform applies when U(0, 1) <= p
        random.randint = lambda a, b: 0  # the one partner
        np.random.beta = lambda a, b: self.beta.pop(0)
        np.random.randint = lambda n: self.randint.pop(0)
        np.random.choice = lambda idx: idx[self.choice % len(idx)]
        argsort = self.saved[5]
        np.argsort = lambda a, *args, **kw: argsort(a, kind="stable")
        return self

    def __exit__(self, *exc):
        random.uniform, random.randint, np.random.beta, np.random.randint, np.random.choice, np.argsort = self.saved


def reference_masks(labels):
    from ultralytics.data.augment import Format

    h, w = labels["img"].shape[:2]
    fmt = Format(bbox_format="xyxy", normalize=False, return_mask=True, mask_ratio=4, mask_overlap=False, batch_idx=False)
    out = fmt({**labels, "img": labels["img"].copy()})
    m = out["masks"].numpy()
    return m if len(labels["cls"]) else np.zeros((0, h // 4, w // 4), np.uint8)


def compare(rep, name, out, prefix, ref, stats):
    ours_img = out[prefix + "img_out"].numpy().astype(int)
    ref_img = ref["img"].astype(int)
    if ours_img.shape != ref_img.shape:
        rep.check(False, f"{name}: image {ours_img.shape} vs reference {ref_img.shape}")
        return
    d = int(np.abs(ours_img - ref_img).max())
    stats["px"] = max(stats["px"], d)
    rep.check(d <= 1, f"{name}: pixels differ by {d}")
    ocls, opolys, oboxes = unpack_instances(out, prefix + "out.")
    rcls = ref["cls"].reshape(-1).astype(int)
    if list(ocls) != list(rcls):
        rep.check(False, f"{name}: classes {list(ocls)} vs reference {list(rcls)}")
        return
    stats["inst"] += len(rcls)
    if len(rcls):
        rb = ref["instances"].bboxes
        bd = float(np.abs(oboxes - rb).max())
        stats["box"] = max(stats["box"], bd)
        rep.check(bd <= 1.0, f"{name}: boxes differ by {bd:.3f} px")
        rm, om = reference_masks(ref), out[prefix + "masks"].numpy()
        for k in range(len(rcls)):
            union = np.logical_or(rm[k] > 0, om[k] > 0).sum()
            agree = 1.0 - np.logical_xor(rm[k] > 0, om[k] > 0).sum() / max(union, 1)
            stats["mask"] = min(stats["mask"], agree)
            rep.check(agree >= 0.995, f"{name}: instance {k} mask agreement {agree:.4f}")


def main():
    from ultralytics.data.augment import CopyPaste, CutMix, MixUp

    if not TOOL.exists():
        sys.exit(f"{TOOL} not built")
    rng = np.random.default_rng(14)
    rep = Report()
    inputs, refs = {}, []

    for c in range(60):
        h, w = 4 * int(rng.integers(16, 40)), 4 * int(rng.integers(16, 40))
        p = [1.0, 0.5, 0.3, 0.7][c % 4]
        n = int(rng.integers(0, 7)) if c % 10 else 0
        main_scene = scene(rng, h, w, n, 10)
        partner_scene = scene(rng, h, w, int(rng.integers(0, 7)), 200)
        img, cls, segs, boxes = main_scene
        pimg, pcls, psegs, pboxes = partner_scene

        # copy_paste, flip mode (no draws).
        pre = f"cpflip.{c}."
        inputs[pre + "img"] = torch.from_numpy(img)
        pack_instances(inputs, pre, cls, list(segs), boxes)
        inputs[pre + "p"] = torch.tensor(p, dtype=torch.float64)
        with fixed_draws():
            ref = CopyPaste(p=p, mode="flip")(labels_of(*main_scene))
        refs.append(("cpflip", c, ref))

        # copy_paste, mixup mode: the partner given.
        pre = f"cppartner.{c}."
        inputs[pre + "img"] = torch.from_numpy(img)
        pack_instances(inputs, pre, cls, list(segs), boxes)
        inputs[pre + "pimg"] = torch.from_numpy(pimg)
        pack_instances(inputs, pre + "partner.", pcls, list(psegs), pboxes)
        inputs[pre + "p"] = torch.tensor(p, dtype=torch.float64)
        with fixed_draws():
            ref = CopyPaste(_Partner(labels_of(*partner_scene)), p=p, mode="mixup")(labels_of(*main_scene))
        refs.append(("cppartner", c, ref))

        # mixup with r drawn.
        r = float(rng.beta(32.0, 32.0))
        pre = f"mixup.{c}."
        inputs[pre + "img"] = torch.from_numpy(img)
        pack_instances(inputs, pre, cls, list(segs), boxes)
        inputs[pre + "pimg"] = torch.from_numpy(pimg)
        pack_instances(inputs, pre + "partner.", pcls, list(psegs), pboxes)
        inputs[pre + "r"] = torch.tensor(r, dtype=torch.float64)
        with fixed_draws(beta=[r]):
            ref = MixUp(_Partner(labels_of(*partner_scene)), p=1.0)(labels_of(*main_scene))
        refs.append(("mixup", c, ref))

        # cutmix with lam, cx, cy per area and the area choice drawn.
        lam = rng.beta(1.0, 1.0, 3)
        cx, cy = rng.integers(0, w, 3), rng.integers(0, h, 3)
        choice = int(rng.integers(0, 3))
        pre = f"cutmix.{c}."
        inputs[pre + "img"] = torch.from_numpy(img)
        pack_instances(inputs, pre, cls, list(segs), boxes)
        inputs[pre + "pimg"] = torch.from_numpy(pimg)
        pack_instances(inputs, pre + "partner.", pcls, list(psegs), pboxes)
        inputs[pre + "lam"] = torch.tensor(lam, dtype=torch.float64)
        inputs[pre + "cx"] = torch.tensor(cx)
        inputs[pre + "cy"] = torch.tensor(cy)
        inputs[pre + "choice"] = torch.tensor(choice)
        randint = [int(v) for k in range(3) for v in (cx[k], cy[k])]
        with fixed_draws(beta=list(lam), randint=randint, choice=choice):
            ref = CutMix(_Partner(labels_of(*partner_scene)), p=1.0)(labels_of(*main_scene))
        refs.append(("cutmix", c, ref))

    with tempfile.TemporaryDirectory() as d:
        out = run_tool("pieces", inputs, Path(d))
    for op in ("cpflip", "cppartner", "mixup", "cutmix"):
        stats = {"px": 0, "box": 0.0, "mask": 1.0, "inst": 0}
        cases = [(c, ref) for o, c, ref in refs if o == op]
        for c, ref in cases:
            compare(rep, f"{op}.{c}", out, f"{op}.{c}.", ref, stats)
        extra = ""
        if op == "cutmix":
            applied = sum(int(out[f"cutmix.{c}.applied"].item()) for c, _ in cases)
            extra = f", {applied} applied"
            rep.check(applied >= 5, f"cutmix applied in only {applied} cases")
        rep.note(f"{op}: {len(cases)} cases, {stats['inst']} output instances{extra}; worst pixel difference "
                 f"{stats['px']}, box {stats['box']:.2e} px, worst mask agreement {stats['mask']:.4f}")
    if rep.failures:
        sys.exit("FAILED:\n" + "\n".join(rep.failures[:50]))
    print("mix oracle: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
