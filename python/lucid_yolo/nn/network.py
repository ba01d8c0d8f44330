"""lucid's segmentation network built in PyTorch from its model dict (the YAML, or the JSON a
weights file carries as metadata), by the rules of src/lucid/model/model.cpp: the scale's depth,
width and channel cap, the repeats, C3k2's inner blocks, SPPF's activation, the head's options.
State-dict names are the C++ model's, so lucid weights load strictly."""
import json
import math

import torch
from torch import nn

from .blocks import C2PSA, C3, SPPF, Bottleneck, C2f, Concat, Conv, Upsample, dw_conv
from .head import SegmentHead

BLOCKS = {"Conv", "DWConv", "Bottleneck", "SPPF", "C2f", "C3", "C3k2", "C2PSA"}
REPEATED = {"C2f", "C3", "C3k2", "C2PSA"}  # the row's repeats go inside the block


def make_divisible(x, divisor):
    return math.ceil(x / divisor) * divisor


def _value(v, nc):
    if v == "nc":
        return nc
    if v in ("None", "null", "~"):
        return None
    if v in ("True", "true"):
        return True
    if v in ("False", "false"):
        return False
    return v


def _arg(a, k, default):
    return default if k >= len(a) or a[k] is None else a[k]


def _block(m, a):
    """One module of a block row from its arguments a = [c1, c2, ...] (repeats inserted for C2f, C3,
    C3k2 and C2PSA)."""
    c1, c2 = a[0], a[1]
    if m in ("Conv", "DWConv"):
        k, s = _arg(a, 2, 1), _arg(a, 3, 1)
        return Conv(c1, c2, k, s, _arg(a, 5, 1)) if m == "Conv" else dw_conv(c1, c2, k, s)
    if m == "Bottleneck":
        return Bottleneck(c1, c2, _arg(a, 2, True), _arg(a, 3, 1), 3, 3, _arg(a, 5, 0.5))
    if m == "SPPF":  # rows of at most [c2, k] are the activated SPPF (YOLOv8/11); YOLO26's longer rows are not
        return SPPF(c1, c2, _arg(a, 2, 5), _arg(a, 3, 3), _arg(a, 4, False), cv1_act=len(a) <= 3)
    if m == "C2f":
        return C2f(c1, c2, _arg(a, 2, 1), _arg(a, 3, False), _arg(a, 4, 1), _arg(a, 5, 0.5), "bottleneck3x3")
    if m == "C3":
        return C3(c1, c2, _arg(a, 2, 1), _arg(a, 3, True), _arg(a, 4, 1), _arg(a, 5, 0.5))
    if m == "C3k2":  # [c1, c2, n, c3k, e, attn, g, shortcut]
        inner = "psa" if _arg(a, 5, False) else "c3k" if _arg(a, 3, False) else "bottleneck"
        return C2f(c1, c2, _arg(a, 2, 1), _arg(a, 7, True), _arg(a, 6, 1), _arg(a, 4, 0.5), inner)
    return C2PSA(c1, c2, _arg(a, 2, 1), _arg(a, 3, 0.5))


class SegmentationNetwork(nn.Module):
    """The layers as `model.<i>`; forward(images) returns the head's input features."""

    def __init__(self, cfg, nc=None):
        super().__init__()
        cfg = dict(cfg)
        self.cfg = cfg
        self.nc = int(nc if nc is not None else cfg.get("nc", 80))
        depth, width, max_channels = cfg.get("depth_multiple", 1.0), cfg.get("width_multiple", 1.0), 1 << 30
        scale = cfg.get("scale") or ""
        if cfg.get("scales"):
            scale = scale or next(iter(cfg["scales"]))
            depth, width, max_channels = cfg["scales"][scale]
        self.end2end = bool(cfg.get("end2end", False))
        self.reg_max = int(cfg.get("reg_max", 16))
        self.model = nn.ModuleList()
        self.inputs, ch, legacy = [], [3], True
        rows = list(cfg["backbone"]) + list(cfg["head"])
        for i, (f, n, m, args) in enumerate(rows):
            args = [_value(v, self.nc) for v in args]
            fr = [f] if isinstance(f, int) else list(f)
            n = max(round(n * depth), 1) if n > 1 else n
            chan = [ch[x] for x in fr] if i else [3]
            if m in BLOCKS:
                c2 = make_divisible(min(args[0], max_channels) * width, 8)
                a = [chan[0], c2, *args[1:]]
                if m in REPEATED:
                    a.insert(2, n)
                    n = 1
                if m == "C3k2":
                    legacy = False
                    if scale in ("m", "l", "x"):
                        a += [False] * (4 - len(a))
                        a[3] = True
                module = _block(m, a) if n == 1 else nn.Sequential(*(_block(m, a) for _ in range(n)))
            elif m == "Concat":
                c2, module = sum(chan), Concat(_arg(args, 0, 1))
            elif m == "nn.Upsample":
                c2, module = chan[0], Upsample(_arg(args, 1, 2.0))
            elif m in ("Segment", "Segment26"):
                npr = make_divisible(min(_arg(args, 2, 256), max_channels) * width, 8)
                module = SegmentHead(_arg(args, 0, self.nc), _arg(args, 1, 32), npr, self.reg_max, self.end2end,
                                     legacy, m == "Segment26", chan)
                c2 = 0
            else:
                raise ValueError(f"layer {i}: unknown module {m}")
            self.model.append(module)
            self.inputs.append(fr)
            ch = [c2] if i == 0 else ch + [c2]
        with torch.no_grad():
            feats = self.features(torch.zeros(1, 3, 256, 256))
        self.head.strides = [256.0 / x.shape[2] for x in feats]
        self.stride = max(self.head.strides)

    @property
    def head(self):
        return self.model[-1]

    def features(self, x):
        """The backbone and neck: the features the head reads (P3, P4, P5)."""
        saved = []
        for i, (m, fr) in enumerate(zip(self.model[:-1], self.inputs)):
            ins = [x if f == -1 else saved[f if f >= 0 else i + f] for f in fr]
            x = m(ins) if isinstance(m, Concat) else m(ins[0])
            saved.append(x)
        last = len(saved)
        return [x if f == -1 else saved[f if f >= 0 else last + f] for f in self.inputs[-1]]

    def forward(self, images):
        return self.features(images)


def read_weights(path):
    """(state dict, model dict, class names, imgsz) of lucid weights (.safetensors as `lucid export
    format=safetensors` writes them: FP32 or FP16 tensors, the model dict as JSON metadata) or of a
    lucid training checkpoint (its EMA weights, ema/...; the run's names and imgsz)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    if "yaml" not in meta:
        raise ValueError(f"{path}: lucid weights carry the model dict as metadata 'yaml'; this file has none")
    tensors = load_file(str(path))
    if "lucid" in meta:  # a training checkpoint
        run = json.loads(meta["lucid"])
        tensors = {k[len("ema/"):]: v for k, v in tensors.items() if k.startswith("ema/")}
        if not tensors:
            raise ValueError(f"{path}: a lucid training checkpoint without EMA weights (ema/...)")
        names, imgsz = run.get("names"), str(run.get("train_args", {}).get("imgsz", ""))
    else:
        names, imgsz = json.loads(meta["names"]) if "names" in meta else None, meta.get("imgsz", "")
    return tensors, json.loads(meta["yaml"]), names, int(imgsz) if imgsz.isdigit() else None


def load_network(path):
    """The network of lucid weights, FP32 in eval mode, and (class names, imgsz) from the file."""
    state, cfg, names, imgsz = read_weights(path)
    nc = len(names) if names else cfg.get("nc")
    net = SegmentationNetwork(cfg, nc)
    net.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=True)
    return net.eval().requires_grad_(False), names or [f"class{i}" for i in range(net.nc)], imgsz
