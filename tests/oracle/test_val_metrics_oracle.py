"""Validation oracle: our metrics, matching, NMS and mask processing against the reference package's.

1. Metrics. Random but realistic validation results (several images, some without labels or without
   predictions; ground-truth boxes with elliptic masks at 1/4 resolution; predictions jittered from
   the labels, duplicated, mislabelled, plus false positives, in confidence order as NMS gives them)
   go through the reference's box_iou / mask_iou, the validator's match_predictions and
   SegmentMetrics, and through ours (val_oracle_tool metrics). The correct-prediction matrices must
   be identical; P, R, mAP50, mAP50-95 of boxes and masks, fitness and per-class AP within 1e-4.
2. NMS. Raw one-to-many predictions (B, 4 + nc + 32, A) with clustered, overlapping boxes through
   ultralytics.utils.nms.non_max_suppression (torchvision NMS) and ours: the same rows in the same
   order. Cases: multi-label class-aware, agnostic, single label, 80 classes over 8400 anchors
   (more than max_nms candidates, max_det reached), an image with nothing above conf.
3. Masks. process_mask, process_mask_native (at the input size, and at the original size as the
   predictor's retina masks), scale_boxes and scale_masks on random prototypes, with the validator's
   ratio_pad (a gain per axis: each side rounded on its own; whole-pixel padding):
   identical masks (up to a few pixels whose logit is within rounding of 0) and boxes within 1e-5.
4. The whole validator. A randomly initialised model (BatchNorm statistics calibrated on images so
   that outputs follow the input; same weights on both sides, FP32 on the CPU) over batches of
   images whose labels are its own detections by the head validated, jittered and partly
   relabelled (overlap-map masks at 1/4, one image without labels): the reference's
   SegmentationValidator (preprocess, postprocess, update_metrics, get_stats) against our
   Validator: the 8 numbers and fitness within 1e-4. Cases: yolo26n-seg and yolo11n-seg on both
   sides' default (nms=None: the one-to-many head and NMS, also for the end-to-end yolo26n-seg),
   yolo26n-seg through its one-to-one head (nms=False on both sides); and with a results file
   (native-resolution masks, boxes and masks mapped back to the original images with the per-axis
   ratio_pad), whose entries must match the reference's (ids, classes, scores within 1e-3, boxes
   within 2e-4 of the image size and 5e-4 of the box's extent, RLE masks differing in at most 0.1% of pixels). The two models
   agree to ~1e-5, not bitwise, so this part agrees within float noise. Labels never share a box:
   the reference breaks IoU ties between labels through an unstable sort (ours takes the later
   label).

LUCID_VAL_ORACLE_SEED=<n> runs one more random case with that seed.
"""
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, SOURCE_DIR, run  # noqa: E402

warnings.filterwarnings("ignore")
import torchvision  # noqa: E402,F401  (the reference NMS uses torchvision when it is imported)
from ultralytics.engine.validator import BaseValidator  # noqa: E402
from ultralytics.utils import ops  # noqa: E402
from ultralytics.utils.metrics import SegmentMetrics, box_iou, mask_iou  # noqa: E402
from ultralytics.utils.nms import non_max_suppression  # noqa: E402

TOOL = BUILD_DIR / "tests" / "val_oracle_tool"
CONVERT = SOURCE_DIR / "scripts" / "ultralytics_weights.py"
TOL = 1e-4
H, W = 160, 224  # network input; masks at 1/4


def ellipse_mask(box, h, w, scale):
    """Filled ellipse inscribed in box (input pixels) on an h x w grid of `scale` input pixels."""
    x1, y1, x2, y2 = (v / scale for v in box)
    cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, max((x2 - x1) / 2, 0.5), max((y2 - y1) / 2, 0.5)
    yy, xx = np.mgrid[0:h, 0:w]
    m = ((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2 <= 1.0
    if not m.any():
        m[min(int(cy), h - 1), min(int(cx), w - 1)] = True
    return m


def random_box(rng, min_size=6, max_size=110):
    w, h = rng.uniform(min_size, max_size, 2)
    x1, y1 = rng.uniform(0, W - w), rng.uniform(0, H - h)
    return np.array([x1, y1, x1 + w, y1 + h])


def make_results(seed, images=16, nc=6):
    rng = np.random.default_rng(seed)
    mh, mw = H // 4, W // 4
    data = []
    for i in range(images):
        n_gt = 0 if i in (0, 5) else int(rng.choice([1, 2, 4, 7, 12]))
        gt_cls = rng.integers(0, nc - 1, n_gt)  # class nc-1 never labelled (only predicted)
        gt_boxes = np.stack([random_box(rng) for _ in range(n_gt)]) if n_gt else np.zeros((0, 4))
        gt_masks = np.stack([ellipse_mask(b, mh, mw, 4) for b in gt_boxes]) if n_gt else np.zeros((0, mh, mw), bool)
        boxes, conf, cls = [], [], []
        if i not in (3, 9):  # images 3 and 9: no predictions
            for b, c in zip(gt_boxes, gt_cls):
                if rng.random() < 0.15:
                    continue  # missed
                for d in range(int(rng.choice([1, 1, 1, 2, 3]))):
                    size = b[2:] - b[:2]
                    jitter = rng.normal(0, 0.06 + 0.08 * d, 4) * np.concatenate([size, size])
                    nb = np.clip(b + jitter, 0, [W, H, W, H])
                    if nb[2] - nb[0] < 1 or nb[3] - nb[1] < 1:
                        continue
                    boxes.append(nb)
                    cls.append(c if rng.random() < 0.85 else rng.integers(0, nc))
                    conf.append(rng.uniform(0.3, 1.0) * (0.6 if d else 1.0))
            for _ in range(int(rng.poisson(4))):  # false positives
                boxes.append(random_box(rng, 3, 80))
                cls.append(rng.integers(0, nc))
                conf.append(rng.uniform(0.001, 0.7))
        order = np.argsort(-np.array(conf, dtype=np.float32), kind="stable")
        boxes = np.array(boxes).reshape(-1, 4)[order]
        conf = np.array(conf, dtype=np.float32).reshape(-1)[order]
        cls = np.array(cls).reshape(-1)[order]
        masks = []
        for b in boxes:  # the shape drawn from a further jittered box, holes, cropped to the box
            size = np.concatenate([b[2:] - b[:2]] * 2)
            m = ellipse_mask(b + rng.normal(0, 0.1, 4) * size, mh, mw, 4)
            m &= rng.random(m.shape) > 0.08
            yy, xx = np.mgrid[0:mh, 0:mw]
            m &= (xx >= b[0] / 4) & (xx < b[2] / 4) & (yy >= b[1] / 4) & (yy < b[3] / 4)
            masks.append(m)
        masks = np.stack(masks) if len(masks) else np.zeros((0, mh, mw), bool)
        data.append(
            dict(
                gt_boxes=torch.tensor(gt_boxes, dtype=torch.float32),
                gt_cls=torch.tensor(gt_cls, dtype=torch.float32),
                gt_masks=torch.tensor(gt_masks, dtype=torch.uint8),
                pred_boxes=torch.tensor(boxes, dtype=torch.float32),
                pred_conf=torch.tensor(conf, dtype=torch.float32),
                pred_cls=torch.tensor(cls, dtype=torch.float32),
                pred_masks=torch.tensor(masks, dtype=torch.uint8),
            )
        )
    return data, nc


def reference_metrics(data, nc):
    validator = SimpleNamespace(iouv=torch.linspace(0.5, 0.95, 10))
    metrics = SegmentMetrics(names={i: str(i) for i in range(nc)})
    tps = []
    for i, d in enumerate(data):
        n_pred = d["pred_cls"].shape[0]
        if d["gt_cls"].shape[0] == 0 or n_pred == 0:
            tp = np.zeros((n_pred, 10), dtype=bool)
            tp_m = tp.copy()
        else:
            iou = box_iou(d["gt_boxes"], d["pred_boxes"])
            tp = BaseValidator.match_predictions(validator, d["pred_cls"], d["gt_cls"], iou).cpu().numpy()
            miou = mask_iou(d["gt_masks"].flatten(1).float(), d["pred_masks"].flatten(1).float())
            tp_m = BaseValidator.match_predictions(validator, d["pred_cls"], d["gt_cls"], miou).cpu().numpy()
        tps.append((tp, tp_m))
        cls = d["gt_cls"].numpy()
        metrics.update_stats(
            {
                "tp": tp,
                "tp_m": tp_m,
                "conf": d["pred_conf"].numpy(),
                "pred_cls": d["pred_cls"].numpy(),
                "target_cls": cls,
                "target_img": np.unique(cls),
                "im_name": f"{i}.jpg",
            }
        )
    metrics.process()
    return metrics, tps


def check_metrics(seed, tmp):
    data, nc = make_results(seed)
    ref, tps = reference_metrics(data, nc)
    tensors = {"nc": torch.tensor([nc])}
    for i, d in enumerate(data):
        for k, v in d.items():
            tensors[f"{k}.{i}"] = v.contiguous()
    inp, out = Path(tmp) / f"m{seed}.in.safetensors", Path(tmp) / f"m{seed}.out.safetensors"
    save_file(tensors, str(inp))
    run([TOOL, "metrics", inp, out])
    ours = load_file(str(out))
    failures = []
    n_pred = 0
    for i, (tp, tp_m) in enumerate(tps):
        n_pred += tp.shape[0]
        for name, r in (("tp", tp), ("tp_m", tp_m)):
            o = ours[f"{name}.{i}"].numpy().astype(bool)
            if o.shape != r.shape or not (o == r).all():
                failures.append(f"seed {seed} image {i}: {name} differs ({int((o != r).sum()) if o.shape == r.shape else 'shape'})")
    ref_results = np.array(ref.mean_results(), dtype=np.float64)
    our_results = ours["results"].numpy()
    worst = float(np.abs(ref_results - our_results).max())
    worst = max(worst, abs(float(ref.fitness) - float(ours["fitness"][0])))
    for name, r in (("box_ap", ref.box.all_ap), ("mask_ap", ref.seg.all_ap), ("box_p", ref.box.p), ("box_r", ref.box.r),
                    ("mask_p", ref.seg.p), ("mask_r", ref.seg.r), ("maps", ref.maps)):
        o = ours[name].numpy()
        if o.shape != np.asarray(r).shape:
            failures.append(f"seed {seed}: {name} shape {o.shape} vs {np.asarray(r).shape}")
            continue
        worst = max(worst, float(np.abs(o - r).max()) if o.size else 0.0)
    if list(ours["classes"].numpy()) != list(ref.box.ap_class_index):
        failures.append(f"seed {seed}: classes {list(ours['classes'].numpy())} vs {list(ref.box.ap_class_index)}")
    if not worst <= TOL:
        failures.append(f"seed {seed}: metrics differ by {worst:.3g} > {TOL}")
    names = ["P(B)", "R(B)", "mAP50(B)", "mAP50-95(B)", "P(M)", "R(M)", "mAP50(M)", "mAP50-95(M)"]
    print(f"metrics seed {seed}: {len(data)} images, {n_pred} predictions, "
          + ", ".join(f"{n} {v:.4f}" for n, v in zip(names, ref_results))
          + f"; worst difference {worst:.3g}")
    return failures


def raw_predictions(rng, bs, anchors, nc, nm=32, objects=12, empty_image=None):
    """(B, 4 + nc + nm, A) xywh in input pixels, sigmoid scores; boxes clustered around objects."""
    pred = torch.zeros(bs, 4 + nc + nm, anchors)
    for b in range(bs):
        centres = rng.uniform([20, 20], [W * 2 - 20, H * 2 - 20], (objects, 2))
        sizes = rng.uniform(10, 120, (objects, 2))
        obj_cls = rng.integers(0, nc, objects)
        owner = rng.integers(0, objects + 1, anchors)  # objects == background
        xy = rng.uniform(0, [W * 2, H * 2], (anchors, 2))
        wh = rng.uniform(4, 60, (anchors, 2))
        logits = rng.normal(-6.5, 1.8, (anchors, nc))
        fg = owner < objects
        o = owner[fg]
        xy[fg] = centres[o] + rng.normal(0, 0.08, (fg.sum(), 2)) * sizes[o]
        wh[fg] = sizes[o] * rng.uniform(0.75, 1.25, (fg.sum(), 2))
        logits[fg, obj_cls[o]] = rng.normal(1.0, 1.5, fg.sum())
        if empty_image == b:
            logits[:] = -12.0
        pred[b, :2] = torch.tensor(xy.T, dtype=torch.float32)
        pred[b, 2:4] = torch.tensor(wh.T, dtype=torch.float32)
        pred[b, 4 : 4 + nc] = torch.tensor(logits.T, dtype=torch.float32).sigmoid()
        pred[b, 4 + nc :] = torch.tensor(rng.normal(0, 1, (nm, anchors)).astype(np.float32))
    return pred


def check_nms(seed, tmp):
    rng = np.random.default_rng(1000 + seed)
    cases = [  # (bs, anchors, nc, conf, iou, max_det, agnostic, multi_label, max_nms, empty image)
        (3, 2100, 8, 0.001, 0.7, 300, False, True, 30000, 2),
        (2, 2100, 8, 0.001, 0.7, 300, True, True, 30000, None),
        (2, 2100, 8, 0.001, 0.7, 300, False, False, 30000, None),
        (1, 8400, 80, 0.001, 0.7, 300, False, True, 30000, None),
        (2, 2100, 8, 0.25, 0.45, 100, False, True, 500, None),
    ]
    tensors = {}
    refs = []
    for k, (bs, a, nc, conf, iou, max_det, agn, multi, max_nms, empty) in enumerate(cases):
        pred = raw_predictions(rng, bs, a, nc, objects=40 if nc == 80 else 12, empty_image=empty)
        tensors[f"pred.{k}"] = pred.contiguous()
        tensors[f"options.{k}"] = torch.tensor([conf, iou, max_det, float(agn), float(multi), nc, max_nms], dtype=torch.float64)
        refs.append(non_max_suppression(pred.clone(), conf, iou, agnostic=agn, multi_label=multi, max_det=max_det,
                                        nc=nc, max_nms=max_nms))
    inp, out = Path(tmp) / f"n{seed}.in.safetensors", Path(tmp) / f"n{seed}.out.safetensors"
    save_file(tensors, str(inp))
    run([TOOL, "nms", inp, out])
    ours = load_file(str(out))
    failures, rows, worst = [], 0, 0.0
    for k, ref in enumerate(refs):
        for b, r in enumerate(ref):
            o = ours[f"out.{k}.{b}"]
            rows += r.shape[0]
            if o.shape != r.shape:
                failures.append(f"nms seed {seed} case {k} image {b}: shape {tuple(o.shape)} vs {tuple(r.shape)}")
                continue
            if r.numel():
                worst = max(worst, (o - r).abs().max().item())
    if worst > 1e-5:
        failures.append(f"nms seed {seed}: kept rows differ by {worst:.3g}")
    print(f"nms seed {seed}: {len(cases)} cases, {rows} kept rows, worst difference {worst:.3g}")
    return failures


def check_masks(seed, tmp):
    rng = np.random.default_rng(2000 + seed)
    tensors, refs = {}, []
    for k, (orig, n) in enumerate([((300, 400), 20), ((160, 224), 5), ((90, 200), 0)]):
        mh, mw = H // 4, W // 4
        protos = torch.tensor(rng.normal(0, 1, (32, mh, mw)), dtype=torch.float32)
        coefs = torch.tensor(rng.normal(0, 0.5, (n, 32)), dtype=torch.float32)
        boxes = torch.tensor(np.stack([random_box(rng, 2, 150) for _ in range(n)]) if n else np.zeros((0, 4)),
                             dtype=torch.float32)
        gain = min(H / orig[0], W / orig[1])
        unpad = (round(orig[0] * gain), round(orig[1] * gain))
        pad_w, pad_h = round((W - unpad[1]) / 2 - 0.1), round((H - unpad[0]) / 2 - 0.1)
        ratio_pad = ((unpad[0] / orig[0], unpad[1] / orig[1]), (pad_w, pad_h))
        proto_masks = ops.process_mask(protos, coefs, boxes, (H, W))
        native = ops.process_mask_native(protos, coefs, boxes, (H, W))
        scaled_boxes = ops.scale_boxes((H, W), boxes.clone(), orig, ratio_pad=ratio_pad)
        scaled_masks = ops.scale_masks(native[None], orig, ratio_pad=ratio_pad)[0].byte()
        # The predictor's retina masks: at the original size, from boxes mapped to it (the logits
        # upsampled 4x first where the input's padding is odd, 1x where there is none).
        native_orig = ops.process_mask_native(protos, coefs, scaled_boxes, orig)
        refs.append((proto_masks, native, scaled_boxes, scaled_masks, native_orig))
        tensors.update({f"protos.{k}": protos, f"coefs.{k}": coefs, f"boxes.{k}": boxes,
                        f"shape.{k}": torch.tensor([H, W]), f"orig.{k}": torch.tensor(list(orig)),
                        f"ratio_pad.{k}": torch.tensor([*ratio_pad[0], pad_w, pad_h], dtype=torch.float64)})
    inp, out = Path(tmp) / f"k{seed}.in.safetensors", Path(tmp) / f"k{seed}.out.safetensors"
    save_file(tensors, str(inp))
    run([TOOL, "masks", inp, out])
    ours = load_file(str(out))
    failures, differing, pixels = [], 0, 0
    for k, (pm, nat, sb, sm, no) in enumerate(refs):
        for name, r in (("proto", pm), ("native", nat), ("masks_scaled", sm), ("native_orig", no)):
            o = ours[f"{name}.{k}"]
            if o.shape != r.shape:
                failures.append(f"masks seed {seed} case {k}: {name} shape {tuple(o.shape)} vs {tuple(r.shape)}")
                continue
            differing += int((o != r).sum())
            pixels += r.numel()
        ob = ours[f"boxes_scaled.{k}"]
        if ob.shape != sb.shape or (sb.numel() and (ob - sb).abs().max().item() > 1e-5):
            failures.append(f"masks seed {seed} case {k}: scaled boxes differ")
    if differing > 10:
        failures.append(f"masks seed {seed}: {differing} of {pixels} mask pixels differ")
    print(f"masks seed {seed}: {pixels} pixels compared, {differing} differ")
    return failures


NAMES = {0: "cat", 1: "dog", 2: "bird"}


def perturb(model, seed):
    """Random BatchNorm statistics and head biases: box distances positive (1-3 cells, or the DFL's
    spread), class logits around -3 so that confidences spread over (0, 1) without saturating, mask
    coefficients around 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                n = torch.randn(m.bias.shape, generator=g)
                if "cv2." in name:
                    m.bias.copy_(1.0 + torch.rand(m.bias.shape, generator=g) * 2 if m.bias.numel() == 4 else n)
                elif "cv3." in name:
                    m.bias.copy_(n * 1.5 - 3)
                else:
                    m.bias.copy_(n)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


def calibrate(model, images):
    """BatchNorm statistics from the images themselves (cumulative over a training-mode pass), so that
    a random network's outputs follow its input instead of collapsing to its biases."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for x in images:
            model(x.float() / 255)
    model.eval()
    for m in bns:
        m.momentum = 0.03


def smooth_images(rng, n):
    low = torch.tensor(rng.uniform(0, 255, (n, 3, H // 16, W // 16)), dtype=torch.float32)
    img = F.interpolate(low, (H, W), mode="bilinear", align_corners=False)
    img = img + torch.tensor(rng.normal(0, 20, (n, 3, H, W)), dtype=torch.float32)
    return img.clamp(0, 255).round().to(torch.uint8)


def make_batches(model, rng, one2one, n_batches=3, bs=2):
    """Batches labelled with the model's own detections (jittered, some relabelled), from the head the
    validation runs through (one2one: the one-to-one head, else the one-to-many head and NMS)."""
    nc = len(NAMES)
    batches, g = [], 0
    model.end2end = one2one
    for bi in range(n_batches):
        img = smooth_images(rng, bs)
        with torch.no_grad():
            (y, _), _ = model(img.float() / 255)
        dets = non_max_suppression(y.clone(), 0.001, 0.7, nc=nc, multi_label=True, end2end=model.end2end)
        batch_idx, cls, bboxes, maps, orig, ratio_pad, files = [], [], [], [], [], [], []
        for i in range(bs):
            k = 0 if (bi, i) == (0, 1) else int(rng.choice([2, 4, 6, 9]))
            inst = []
            for det in dets[i][:k]:
                # Jittered, clipped, then moved inwards a little: no two labels share a box (the
                # reference breaks IoU ties between labels through an unstable sort).
                box = np.clip(det[:4].numpy() + rng.normal(0, 2.0, 4), 0, [W, H, W, H])
                box = box + rng.uniform(0.05, 2.0, 4) * [1, 1, -1, -1]
                if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                    continue
                c = int(det[5]) if rng.random() < 0.85 else int(rng.integers(0, nc))
                inst.append((box, c, ellipse_mask(box, H // 4, W // 4, 4)))
            inst.sort(key=lambda t: -int(t[2].sum()))  # area-descending, as the overlap map needs
            m = np.zeros((H // 4, W // 4), np.uint8)
            for j, (box, c, mask) in enumerate(inst):
                m[mask] = j + 1
                batch_idx.append(i)
                cls.append(c)
                bboxes.append([(box[0] + box[2]) / 2 / W, (box[1] + box[3]) / 2 / H, (box[2] - box[0]) / W,
                               (box[3] - box[1]) / H])
            maps.append(m)
            h0, w0 = int(rng.integers(100, 500)), int(rng.integers(100, 500))
            r = min(H / h0, W / w0, 1.0)
            unpad = (round(h0 * r), round(w0 * r))
            pad_w, pad_h = round((W - unpad[1]) / 2 - 0.1), round((H - unpad[0]) / 2 - 0.1)
            orig.append((h0, w0))
            ratio_pad.append(((unpad[0] / h0, unpad[1] / w0), (pad_w, pad_h)))
            files.append(f"images/{1000 + g}.jpg")
            g += 1
        batches.append({
            "img": img,
            "batch_idx": torch.tensor(batch_idx, dtype=torch.float32),
            "cls": torch.tensor(cls, dtype=torch.float32).view(-1, 1),
            "bboxes": torch.tensor(bboxes, dtype=torch.float32).view(-1, 4),
            "masks": torch.tensor(np.stack(maps)),
            "ori_shape": orig,
            "ratio_pad": ratio_pad,
            "im_file": files,
        })
    model.end2end = False
    return batches


def save_batches(batches, path):
    tensors = {}
    for b, batch in enumerate(batches):
        tensors.update({f"img.{b}": batch["img"], f"batch_idx.{b}": batch["batch_idx"], f"cls.{b}": batch["cls"],
                        f"bboxes.{b}": batch["bboxes"], f"masks.{b}": batch["masks"],
                        f"orig.{b}": torch.tensor(batch["ori_shape"]),
                        f"letterbox.{b}": torch.tensor([[*rp[0], *rp[1]] for rp in batch["ratio_pad"]],
                                                       dtype=torch.float64)})
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))


def reference_validate(model, batches, one2one, native, tmp):
    from ultralytics.models.yolo.segment import SegmentationValidator

    v = SegmentationValidator(save_dir=Path(tmp) / "refval", args=dict(task="segment", mode="val", plots=False,
                                                                       verbose=False, conf=0.001, iou=0.7))
    v.device = torch.device("cpu")
    v.data = {"val": "", "names": NAMES}
    model.names = NAMES
    model.end2end = one2one  # the validator's nms=False, else its default nms=None
    v.init_metrics(model)
    if native:
        v.args.save_json = True
        v.process = ops.process_mask_native
    for batch in batches:
        b = v.preprocess(dict(batch))
        with torch.no_grad():
            preds = model(b["img"])
        v.update_metrics(v.postprocess(preds), b)
    v.get_stats()
    model.end2end = False
    return np.array(v.metrics.mean_results(), dtype=np.float64), float(v.metrics.fitness), v.jdict, v.seen


def compare_json(ours, ref):
    """Pairs each of our entries with a reference entry of the same image, file and class, score within
    1e-3 and the closest box (then score); then compares boxes and decoded masks."""
    from pycocotools import mask as mask_utils

    if len(ours) != len(ref):
        return [f"results file: {len(ours)} entries vs reference {len(ref)}"], 0, 0
    pool = {}
    for r in ref:
        pool.setdefault((r["image_id"], r["file_name"], r["category_id"]), []).append(r)
    failures, differing, pixels = [], 0, 0
    for o in ours:
        cands = [r for r in pool.get((o["image_id"], o["file_name"], o["category_id"]), [])
                 if abs(r["score"] - o["score"]) <= 1e-3]
        if not cands:
            failures.append(f"results file: no reference entry for {dict((k, o[k]) for k in ('image_id', 'category_id', 'bbox', 'score'))}")
            break
        r = min(cands, key=lambda r: (max(abs(a - b) for a, b in zip(o["bbox"], r["bbox"])), abs(r["score"] - o["score"])))
        pool[(o["image_id"], o["file_name"], o["category_id"])].remove(r)
        # The two models' outputs agree to ~1e-5 relative; a box far from its anchor, on the stride-32
        # level (32 pixels a grid unit), to ~1e-4 of the image, and a random model's largest boxes to
        # ~3e-4 of their own extent (CPU kernels of other instruction sets round otherwise); boxes are
        # rounded to 3 decimals.
        extent = max(abs(b) for b in r["bbox"])
        if max(abs(a - b) for a, b in zip(o["bbox"], r["bbox"])) > 2e-4 * max(r["segmentation"]["size"]) + 5e-4 * extent + 2e-3:
            failures.append(f"results file: box {o['bbox']} vs {r['bbox']}")
            break
        if o["segmentation"]["size"] != list(r["segmentation"]["size"]):
            failures.append("results file: mask sizes differ")
            break
        mo = mask_utils.decode({"size": o["segmentation"]["size"], "counts": o["segmentation"]["counts"].encode()})
        mr = mask_utils.decode({"size": r["segmentation"]["size"], "counts": r["segmentation"]["counts"].encode()})
        differing += int((mo != mr).sum())
        pixels += mr.size
    if pixels and differing > 1e-3 * pixels:
        failures.append(f"results file: {differing} of {pixels} mask pixels differ")
    return failures, differing, pixels


def check_validator(tmp):
    from ultralytics.nn.tasks import SegmentationModel

    failures = []
    rng = np.random.default_rng(7)
    tmp = Path(tmp)
    for name, seed in (("yolo26n-seg", 3), ("yolo11n-seg", 4)):
        torch.manual_seed(seed)
        model = SegmentationModel(f"{name}.yaml", nc=len(NAMES), verbose=False)
        perturb(model, seed)
        calibrate(model, [smooth_images(rng, 4) for _ in range(2)])
        torch.save({"model": model}, tmp / "ref.pt")
        run([sys.executable, CONVERT, "to-safetensors", tmp / "ref.pt", tmp / "ref.safetensors"])
        has_one2one = getattr(model.model[-1], "one2one_cv2", None) is not None
        batches = {head: make_batches(model, rng, head) for head in ([False, True] if has_one2one else [False])}
        for head, bs in batches.items():
            save_batches(bs, tmp / f"batches.{int(head)}.safetensors")
        variants = [(False, False), (False, True)] + ([(True, False)] if has_one2one else [])
        for one2one, native in variants:
            what = f"{name}{' one-to-one (nms=False)' if one2one else ''}{' with results file' if native else ''}"
            ref, ref_fit, jdict, seen = reference_validate(model, batches[one2one], one2one, native, tmp)
            cmd = [TOOL, "validate", f"{name}.yaml", len(NAMES), tmp / "ref.safetensors",
                   tmp / f"batches.{int(one2one)}.safetensors", tmp / "val.out.safetensors"]
            if one2one:
                cmd += ["--nms", "False"]
            if native:
                cmd += ["--json", tmp / "results.json"]
            run(cmd)
            ours = load_file(str(tmp / "val.out.safetensors"))
            worst = max(float(np.abs(ours["results"].numpy() - ref).max()), abs(float(ours["fitness"][0]) - ref_fit))
            if int(ours["counts"][0]) != seen:
                failures.append(f"{what}: {int(ours['counts'][0])} images vs {seen}")
            if not worst <= TOL:
                failures.append(f"{what}: metrics {ours['results'].numpy().round(5)} vs {ref.round(5)}")
            extra = ""
            if native:
                f, differing, pixels = compare_json(json.loads((tmp / "results.json").read_text()), jdict)
                failures += [f"{what}: {x}" for x in f]
                extra = f", {len(jdict)} results, {differing} of {pixels} mask pixels differ"
            print(f"validator {what}: " + " ".join(f"{v:.4f}" for v in ref)
                  + f"; worst difference {worst:.3g}{extra}")
    return failures


def main():
    seeds = [0, 1, 2]
    if os.environ.get("LUCID_VAL_ORACLE_SEED"):
        seeds.append(int(os.environ["LUCID_VAL_ORACLE_SEED"]))
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            failures += check_metrics(seed, tmp)
            failures += check_nms(seed, tmp)
            failures += check_masks(seed, tmp)
        failures += check_validator(tmp)
    if failures:
        sys.exit("\n".join(failures))
    print("validation oracle: all checks passed")


if __name__ == "__main__":
    main()
