"""Loss oracle: the reference package's segmentation loss (ultralytics.utils.loss.v8SegmentationLoss,
and E2ELoss for yolo26) and lucid's, FP32 on the CPU, fed the same fixed random head outputs and the
same targets (an image without instances, a crowded image of overlapping instances, tiny boxes that
exercise the small-object expansion, large and border boxes; an all-empty batch; masks at another
size than the prototypes), in overlap and per-instance mask modes, for yolo26n-seg (end2end, reg_max
1, semantic term, mask-aware assignment: SegTaskAlignedAssigner) and yolo11n-seg (reg_max 16).

Asserts: every loss term (total, per branch, logged items) within 1e-5 relative; identical
assignments (fg mask, target_gt_idx, target labels) and soft target scores within 1e-5; gradients of
the loss w.r.t. every prediction within GRAD_TOL (relative to the largest reference gradient); the
end2end branch weights. The TaskAlignedAssigner is also compared on its own (one-to-many topk 10,
one-to-one topk 7 / topk2 1, padded GT rows, ties, no GT at all)."""
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

warnings.filterwarnings("ignore")
from ultralytics.cfg import get_cfg  # noqa: E402
from ultralytics.nn.tasks import SegmentationModel  # noqa: E402
from ultralytics.utils import LOGGER  # noqa: E402
from ultralytics.utils.tal import SegTaskAlignedAssigner, TaskAlignedAssigner  # noqa: E402

LOGGER.setLevel("WARNING")

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", SOURCE_DIR / "build"))
TOOL = BUILD_DIR / "tests" / "loss_oracle_tool"
LOSS_TOL = 1e-5
GRAD_TOL = 1e-5
NC = 4
NM = 32
STRIDES = (8, 16, 32)
SEED = int(os.environ.get("LUCID_LOSS_ORACLE_SEED", "0"))  # other seeds: more random cases
ASSIGN_KEYS = ("target_labels", "target_bboxes", "target_scores", "fg_mask", "target_gt_idx")


def run_tool(mode, inputs, tmp):
    src, dst = tmp / f"{mode}_in.safetensors", tmp / f"{mode}_out.safetensors"
    save_file({k: v.detach().clone().contiguous() for k, v in inputs.items()}, src)
    r = subprocess.run([str(TOOL), mode, str(src), str(dst)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"loss_oracle_tool {mode} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return load_file(dst)


class Checks:
    def __init__(self):
        self.failures = []
        self.worst = {}  # kind -> worst relative difference

    def _note(self, kind, rel):
        self.worst[kind] = max(self.worst.get(kind, 0.0), rel)

    def terms(self, name, ours, ref, tol=LOSS_TOL):
        """Element-wise relative difference of small vectors (each loss term on its own)."""
        ours, ref = ours.double().flatten(), ref.detach().double().flatten()
        if ours.shape != ref.shape:
            self.failures.append(f"{name}: shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
            return
        for i, (a, b) in enumerate(zip(ours.tolist(), ref.tolist())):
            rel = abs(a - b) / abs(b) if b != 0 else (0.0 if a == 0 else float("inf"))
            self._note("loss terms", rel)
            if not rel <= tol:
                self.failures.append(f"{name}[{i}]: {a!r} vs reference {b!r} (relative {rel:.3g} > {tol:g})")

    def close(self, name, ours, ref, tol, kind):
        """max|a - b| / max|ref| over a tensor."""
        ours, ref = ours.double(), ref.detach().double()
        if ours.shape != ref.shape:
            self.failures.append(f"{name}: shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
            return
        if ref.numel() == 0:
            return
        scale = max(ref.abs().max().item(), 1e-30)
        rel = (ours - ref).abs().max().item() / scale
        self._note(kind, rel)
        if not rel <= tol:
            self.failures.append(f"{name}: relative difference {rel:.3g} > {tol:g}")

    def equal(self, name, ours, ref):
        ref = ref.detach()
        if ours.shape != ref.shape or not torch.equal(ours.to(ref.dtype), ref):
            n = (ours.to(ref.dtype) != ref).sum().item() if ours.shape == ref.shape else "shape"
            self.failures.append(f"{name}: differs from the reference ({n} elements)")

    def assignment(self, name, ours, ref):
        """ref: the reference assigner's output tuple."""
        labels, bboxes, scores, fg, gt_idx = ref
        fg = fg.bool()
        self.equal(f"{name}.fg_mask", ours["fg_mask"], fg)
        self.equal(f"{name}.target_gt_idx[fg]", ours["target_gt_idx"][fg], gt_idx.long()[fg])
        self.equal(f"{name}.target_labels[fg]", ours["target_labels"][fg], labels.long()[fg])
        self.equal(f"{name}.target_bboxes[fg]", ours["target_bboxes"][fg], bboxes[fg])
        self.close(f"{name}.target_scores", ours["target_scores"], scores, LOSS_TOL, "target scores")
        if gt_idx.numel():
            self.equal(f"{name}.target_gt_idx", ours["target_gt_idx"], gt_idx.long())

    def finish(self):
        for kind, rel in self.worst.items():
            print(f"  worst relative difference, {kind}: {rel:.3g}")
        if self.failures:
            sys.exit("\n".join(self.failures))


# ---------------------------------------------------------------- fixed random inputs

def levels(h, w):
    return [(h // s, w // s) for s in STRIDES]


def make_preds(g, bs, h, w, reg_max, semantic):
    """One branch's raw head outputs (B, C, A) plus protos/semantic, as the heads would give them."""
    na = sum(a * b for a, b in levels(h, w))
    if reg_max > 1:
        # A peaked distribution per side, peaks at random bins 0..5, so boxes have sensible sizes.
        bins = torch.arange(reg_max, dtype=torch.float32).view(1, 1, reg_max, 1)
        centre = torch.rand(bs, 4, 1, na, generator=g) * 5
        boxes = torch.randn(bs, 4, reg_max, na, generator=g) + 4 * torch.exp(-((bins - centre) ** 2) / 2)
        boxes = boxes.reshape(bs, 4 * reg_max, na)
    else:
        boxes = torch.rand(bs, 4, na, generator=g) * 3 + 0.2
        negative = torch.rand(bs, 4, na, generator=g) < 0.03  # a few degenerate boxes
        boxes = torch.where(negative, -torch.rand(bs, 4, na, generator=g) * 0.5, boxes)
    out = {
        "boxes": boxes,
        "scores": torch.randn(bs, NC, na, generator=g) - 1,
        "mask_coefficient": torch.randn(bs, NM, na, generator=g),
        "proto": torch.randn(bs, NM, h // 4, w // 4, generator=g),
    }
    if semantic:
        out["semantic"] = torch.randn(bs, NC, h // 8, w // 8, generator=g)
    return out


def rand_range(g, lo, hi):
    return lo + (hi - lo) * torch.rand((), generator=g).item()


def scene(g, kind, h, w):
    """Instances (cls, x1, y1, x2, y2) in input pixels."""
    boxes = []

    def add(cx, cy, bw, bh):
        x1, y1 = max(cx - bw / 2, 0.0), max(cy - bh / 2, 0.0)
        x2, y2 = min(cx + bw / 2, float(w)), min(cy + bh / 2, float(h))
        if x2 - x1 > 0.5 and y2 - y1 > 0.5:
            boxes.append((int(torch.randint(NC, (), generator=g)), x1, y1, x2, y2))

    if kind == "crowded":  # many overlapping instances around the centre
        for _ in range(30):
            add(w / 2 + rand_range(g, -50, 50), h / 2 + rand_range(g, -40, 40), rand_range(g, 12, 90),
                rand_range(g, 12, 90))
    elif kind == "tiny":  # sides below the smallest stride (small-object expansion), some coincident
        for _ in range(8):
            add(rand_range(g, 10, w - 10), rand_range(g, 10, h - 10), rand_range(g, 2, 7.5), rand_range(g, 2, 7.5))
        add(40.3, 50.7, 5.0, 30.0)  # one side tiny
        add(120.0, 90.0, 28.0, 3.5)
        add(200.0, 150.0, 4.0, 4.0)
        add(201.0, 151.0, 5.0, 3.0)  # overlapping tiny pair
        add(rand_range(g, 40, w - 40), rand_range(g, 40, h - 40), 40.0, 35.0)
    elif kind == "large":  # large boxes, the whole image, boxes on the border
        add(w / 2, h / 2, float(w), float(h))
        add(w - 30.0, h / 2, 60.0, 120.0)
        add(50.0, 40.0, 100.0, 80.0)
        add(w / 2 + 10, h - 20.0, 140.0, 40.0)
    elif kind == "single":
        add(rand_range(g, 40, w - 40), rand_range(g, 40, h - 40), rand_range(g, 20, 60), rand_range(g, 20, 60))
    return boxes


def make_targets(g, kinds, h, w, mask_scale=4):
    """The reference dataloader's batch: labels in area-descending order per image, the overlap map
    (value k+1 = k-th instance), per-instance masks, the semantic class map."""
    hm, wm = h // mask_scale, w // mask_scale
    ys = (torch.arange(hm, dtype=torch.float64) + 0.5) * mask_scale
    xs = (torch.arange(wm, dtype=torch.float64) + 0.5) * mask_scale
    batch_idx, cls, bboxes, inst_masks, overlap, sem = [], [], [], [], [], []
    for i, kind in enumerate(kinds):
        items = []
        for c, x1, y1, x2, y2 in scene(g, kind, h, w):
            cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2
            m = (((xs.view(1, -1) - cx) / rx) ** 2 + ((ys.view(-1, 1) - cy) / ry) ** 2) <= 1.0
            items.append((int(m.sum()), c, (x1, y1, x2, y2), m))
        items.sort(key=lambda t: -t[0])  # stable: area descending
        omap = torch.zeros(hm, wm, dtype=torch.uint8)
        smap = torch.zeros(hm, wm, dtype=torch.uint8)
        for k, (_, c, (x1, y1, x2, y2), m) in enumerate(items):
            omap = torch.where(m, torch.tensor(k + 1, dtype=torch.uint8), omap)
            smap = torch.where(m, torch.tensor(c, dtype=torch.uint8), smap)
            batch_idx.append(float(i))
            cls.append(float(c))
            bboxes.append([(x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h])
            inst_masks.append(m.to(torch.uint8))
        overlap.append(omap)
        sem.append(smap)
    n = len(cls)
    return {
        "batch_idx": torch.tensor(batch_idx, dtype=torch.float32).view(n),
        "cls": torch.tensor(cls, dtype=torch.float32).view(n, 1),
        "bboxes": torch.tensor(bboxes, dtype=torch.float32).view(n, 4),
        "overlap_masks": torch.stack(overlap),
        "instance_masks": torch.stack(inst_masks) if n else torch.zeros(0, hm, wm, dtype=torch.uint8),
        "sem_masks": torch.stack(sem),
    }


# ---------------------------------------------------------------- the reference side

def build_criterion(yaml, overlap, epochs, updates):
    torch.manual_seed(0)
    model = SegmentationModel(yaml, nc=NC, verbose=False)
    model.args = get_cfg(overrides={"overlap_mask": overlap, "epochs": epochs})
    criterion = model.init_criterion()
    for _ in range(updates if hasattr(criterion, "update") else 0):
        criterion.update()
    return model, criterion


def capture(obj, attr, store):
    original = getattr(obj, attr)

    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        store.append(out)
        return out

    setattr(obj, attr, wrapper)


def reference_loss(yaml, e2e, overlap, epochs, updates, preds, feats, batch):
    model, crit = build_criterion(yaml, overlap, epochs, updates)
    leaves = {}

    def leaf(key):
        leaves[key] = preds[key].clone().requires_grad_(True)
        return leaves[key]

    o2m = {k: leaf(f"o2m.{k}") for k in ("boxes", "scores", "mask_coefficient")}
    proto = leaf("o2m.proto")
    o2m["feats"] = feats
    o2m["proto"] = (proto, leaf("o2m.semantic")) if "o2m.semantic" in preds else proto
    stores = {"o2m": [], "o2o": []}
    losses = {"o2m": [], "o2o": []}
    if e2e:
        o2o = {k: leaf(f"o2o.{k}") for k in ("boxes", "scores", "mask_coefficient")}
        o2o["feats"] = feats
        o2o["proto"] = tuple(p.detach() for p in o2m["proto"]) if isinstance(o2m["proto"], tuple) else proto.detach()
        for b, c in (("o2m", crit.one2many), ("o2o", crit.one2one)):
            capture(c.assigner, "forward", stores[b])
            capture(c, "loss", losses[b])
        total, items = crit({"one2many": o2m, "one2one": o2o}, batch)
        weights = (crit.o2m, crit.o2o)
    else:
        capture(crit.assigner, "forward", stores["o2m"])
        capture(crit, "loss", losses["o2m"])
        total, items = crit(o2m, batch)
        weights = (0.8, 1.0 - 0.8)
    total.sum().backward()
    grads = {k: (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in leaves.items()}
    items = torch.stack(list(items.values()))
    return total, items, losses, stores, grads, weights, list(crit.one2many.loss_names if e2e else crit.loss_names)


# ---------------------------------------------------------------- loss cases

MODELS = {
    # mask_assign: the reference assigns yolo26-seg with SegTaskAlignedAssigner (mask IoU in the overlap)
    "yolo26n-seg": dict(yaml="yolo26n-seg.yaml", e2e=True, reg_max=1, mask_assign=True),
    "yolo11n-seg": dict(yaml="yolo11n-seg.yaml", e2e=False, reg_max=16, mask_assign=False),
}


def loss_cases():
    g = torch.Generator().manual_seed(SEED)
    h, w = 192, 256
    full = make_targets(g, ["empty", "crowded", "tiny", "large"], h, w)
    empty = make_targets(g, ["empty", "empty"], h, w)
    half = make_targets(g, ["single", "crowded"], h, w, mask_scale=8)  # masks smaller than the protos
    square = make_targets(g, ["tiny", "single", "large"], 160, 160)
    cases = []
    for name, m in MODELS.items():
        branch = build_criterion(m["yaml"], True, 10, 0)[1]
        branch = getattr(branch, "one2many", branch)
        if isinstance(branch.assigner, SegTaskAlignedAssigner) != m["mask_assign"]:
            sys.exit(f"{name}: the reference assigns with {type(branch.assigner).__name__}, "
                     f"the test expects mask_assign={m['mask_assign']}")
        for overlap in (True, False):
            cases.append((f"{name} crowded/tiny/empty overlap={overlap}", name, m, overlap, full, h, w, 3))
        cases.append((f"{name} no instances", name, m, True, empty, h, w, 0))
        cases.append((f"{name} no instances per-instance masks", name, m, False, empty, h, w, 0))
        cases.append((f"{name} masks at 1/8", name, m, True, half, h, w, 9))
        cases.append((f"{name} 160x160 per-instance masks", name, m, False, square, 160, 160, 1))
    inputs, expected = {}, {}
    for k, (title, name, m, overlap, t, hh, ww, updates) in enumerate(cases):
        c = f"c{k}"
        bs = t["overlap_masks"].shape[0]
        epochs = 10
        preds = {f"o2m.{key}": v for key, v in make_preds(g, bs, hh, ww, m["reg_max"], m["e2e"]).items()}
        if m["e2e"]:
            o2o = make_preds(g, bs, hh, ww, m["reg_max"], False)
            preds.update({f"o2o.{key}": o2o[key] for key in ("boxes", "scores", "mask_coefficient")})
        feats = [torch.zeros(bs, 1, a, b) for a, b in levels(hh, ww)]
        masks = t["overlap_masks"] if overlap else t["instance_masks"]
        batch = {"batch_idx": t["batch_idx"], "cls": t["cls"], "bboxes": t["bboxes"], "masks": masks,
                 "sem_masks": t["sem_masks"]}
        for key, v in preds.items():
            inputs[f"{c}.{key}"] = v
        for i, f in enumerate(feats):
            inputs[f"{c}.feat{i}"] = f
        for key in ("batch_idx", "cls", "bboxes", "masks", "sem_masks"):
            inputs[f"{c}.{key}"] = batch[key]
        cfg = {"nc": NC, "reg_max": m["reg_max"], "end2end": int(m["e2e"]), "overlap": int(overlap),
               "epochs": epochs, "updates": updates, "mask_assign": int(m["mask_assign"])}
        for key, v in cfg.items():
            inputs[f"{c}.cfg.{key}"] = torch.tensor([v], dtype=torch.int64)
        inputs[f"{c}.cfg.strides"] = torch.tensor(STRIDES, dtype=torch.float64)
        expected[c] = (title, m["e2e"],
                       reference_loss(m["yaml"], m["e2e"], overlap, epochs, updates, preds, feats, batch), preds)
    return inputs, expected


def check_losses(tmp, checks):
    inputs, expected = loss_cases()
    ours = run_tool("loss", inputs, tmp)
    for c, (title, e2e, ref, preds) in expected.items():
        total, items, losses, stores, grads, weights, names = ref
        print(f"{title}: items {dict(zip(names, [round(x, 6) for x in items.tolist()]))}, "
              f"fg {int(stores['o2m'][0][3].sum()) if stores['o2m'] else 0} (o2m)"
              + (f" / {int(stores['o2o'][0][3].sum())} (o2o)" if e2e else ""))
        checks.terms(f"{title}: total", ours[f"{c}.total"], total)
        checks.terms(f"{title}: items", ours[f"{c}.items"], items)
        for b in ("o2m", "o2o") if e2e else ("o2m",):
            checks.terms(f"{title}: {b} loss", ours[f"{c}.{b}.loss"], losses[b][0][0])
            checks.assignment(f"{title}: {b}", {k: ours[f"{c}.{b}.{k}"] for k in ASSIGN_KEYS}, stores[b][0])
        if e2e:
            checks.terms(f"{title}: e2e weights", ours[f"{c}.weights"], torch.tensor(weights, dtype=torch.float64), 0)
        for key, gref in grads.items():
            checks.close(f"{title}: d total / d {key}", ours[f"grad.{c}.{key}"], gref, GRAD_TOL, "gradients")


# ---------------------------------------------------------------- assigner cases

def grid_anchors(h, w):
    pts = []
    for s in STRIDES:
        ys, xs = torch.meshgrid(torch.arange(h // s) + 0.5, torch.arange(w // s) + 0.5, indexing="ij")
        pts.append(torch.stack((xs, ys), -1).view(-1, 2) * s)
    return torch.cat(pts).float()


def assigner_cases():
    g = torch.Generator().manual_seed(SEED + 1000)
    h, w = 192, 256
    anc = grid_anchors(h, w)
    na = anc.shape[0]
    cases = []
    for topk, topk2 in ((10, 10), (7, 1), (13, 13)):
        for ties in (False, True):
            bs, m = 3, 14
            scores = torch.rand(bs, na, NC, generator=g)
            ltrb = torch.rand(bs, na, 4, generator=g) * 40 + 2
            if ties:  # quantised scores and equal-sized boxes: many exactly tied metrics
                scores = (scores * 4).round() / 4
                ltrb = torch.full_like(ltrb, 12.0)
            boxes = torch.cat((anc - ltrb[..., :2], anc + ltrb[..., 2:]), -1)
            gt = torch.zeros(bs, m, 4)
            labels = torch.zeros(bs, m, 1)
            valid = torch.zeros(bs, m, 1)
            counts = (m, 9, 0) if topk != 13 else (m, 1, 5)
            for b in range(bs):
                for j in range(counts[b]):
                    cx, cy = rand_range(g, 0, w), rand_range(g, 0, h)
                    bw = rand_range(g, 2, 7) if j % 3 == 0 else rand_range(g, 8, 120)
                    bh = rand_range(g, 2, 7) if j % 4 == 0 else rand_range(g, 8, 120)
                    if j == 5:  # a duplicate of GT 4 (identical boxes)
                        gt[b, j] = gt[b, 4]
                    else:
                        gt[b, j] = torch.tensor([max(cx - bw / 2, 0), max(cy - bh / 2, 0), min(cx + bw / 2, w),
                                                 min(cy + bh / 2, h)])
                    labels[b, j, 0] = float(torch.randint(NC, (), generator=g))
                    valid[b, j, 0] = 1.0
            cases.append(dict(topk=topk, topk2=topk2, pd_scores=scores, pd_bboxes=boxes, anc_points=anc,
                              gt_labels=labels, gt_bboxes=gt, mask_gt=valid))
    # No GT at all.
    cases.append(dict(topk=10, topk2=10, pd_scores=torch.rand(2, na, NC, generator=g),
                      pd_bboxes=torch.cat((anc - 10, anc + 10), -1).expand(2, -1, -1).clone(), anc_points=anc,
                      gt_labels=torch.zeros(2, 0, 1), gt_bboxes=torch.zeros(2, 0, 4), mask_gt=torch.zeros(2, 0, 1)))
    return cases


def check_assigner(tmp, checks):
    cases = assigner_cases()
    inputs, refs = {}, {}
    for k, case in enumerate(cases):
        c = f"a{k}"
        assigner = TaskAlignedAssigner(topk=case["topk"], num_classes=NC, alpha=0.5, beta=6.0, stride=list(STRIDES),
                                       topk2=case["topk2"])
        refs[c] = assigner(case["pd_scores"], case["pd_bboxes"], case["anc_points"], case["gt_labels"],
                           case["gt_bboxes"], case["mask_gt"])
        for key in ("pd_scores", "pd_bboxes", "anc_points", "gt_labels", "gt_bboxes", "mask_gt"):
            inputs[f"{c}.{key}"] = case[key]
        for key in ("topk", "topk2"):
            inputs[f"{c}.cfg.{key}"] = torch.tensor([case[key]], dtype=torch.int64)
        inputs[f"{c}.cfg.nc"] = torch.tensor([NC], dtype=torch.int64)
        inputs[f"{c}.cfg.strides"] = torch.tensor(STRIDES, dtype=torch.float64)
    ours = run_tool("assign", inputs, tmp)
    for k, case in enumerate(cases):
        c = f"a{k}"
        title = f"assigner topk {case['topk']}/{case['topk2']} case {k}"
        print(f"{title}: {int(refs[c][3].sum())} foreground anchors")
        checks.assignment(title, {key: ours[f"{c}.{key}"] for key in ASSIGN_KEYS}, refs[c])


def main():
    torch.set_num_threads(1)
    if not TOOL.exists():
        sys.exit(f"{TOOL} not built")
    checks = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        check_assigner(tmp, checks)
        check_losses(tmp, checks)
    checks.finish()
    print("loss oracle: OK")


if __name__ == "__main__":
    main()
