#!/usr/bin/env python3
"""Weights interchange with the Ultralytics package (safetensors in the middle).

  to-safetensors IN.pt OUT.safetensors            an Ultralytics checkpoint -> lucid weights
  to-pt [MODEL.yaml] IN.safetensors OUT.pt [--nc N] [--fp32]
                                                   lucid weights or a lucid training checkpoint (its
                                                   EMA weights) -> an Ultralytics checkpoint

State-dict names are identical on both sides, so the conversion is a strict name-for-name copy. lucid
weights carry the model dict (`yaml`, as JSON), `nc`, `names` (a JSON list) and `imgsz` as metadata;
training checkpoints carry the run state under `lucid` and their tensors under the prefixes model/,
ema/, optim/, grad/ and hyper/ (the EMA is what is converted). MODEL.yaml is needed only for weights
without the `yaml` metadata.
"""
import argparse
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def to_safetensors(src, dst):
    ckpt = torch.load(src, map_location="cpu", weights_only=False)
    model = (ckpt.get("ema") or ckpt["model"]) if isinstance(ckpt, dict) else ckpt
    state = {k: v.detach().float().contiguous() if v.is_floating_point() else v.contiguous()
             for k, v in model.state_dict().items()}
    meta = {"source": str(src), "nc": str(model.yaml["nc"]), "yaml": json.dumps(model.yaml, default=str)}
    names = getattr(model, "names", None)
    if isinstance(names, dict) and names:
        meta["names"] = json.dumps([str(names[i]) for i in range(len(names))])
    args = ckpt.get("train_args") if isinstance(ckpt, dict) else None
    if isinstance(args, dict):
        if isinstance(args.get("imgsz"), int):
            meta["imgsz"] = str(args["imgsz"])
        if isinstance(args.get("data"), str):
            meta["data"] = args["data"]
    save_file(state, dst, metadata=meta)
    print(f"{src} -> {dst}: {len(state)} tensors")


def read_lucid(src):
    """(state dict, model dict or None, class names or None, imgsz or None, data or None) of lucid weights."""
    with safe_open(src, "pt") as f:
        meta = f.metadata() or {}
    tensors = load_file(src)
    names, imgsz, data = None, None, None
    if "lucid" in meta:  # a training checkpoint: its EMA weights and the run's class names and options
        run = json.loads(meta["lucid"])
        tensors = {k[len("ema/"):]: v for k, v in tensors.items() if k.startswith("ema/")}
        if not tensors:
            sys.exit(f"{src}: a lucid training checkpoint without EMA weights (ema/...)")
        names = run.get("names")
        args = run.get("train_args", {})
        if str(args.get("imgsz", "")).isdigit():
            imgsz = int(args["imgsz"])
        data = args.get("data") or None
    else:
        if "names" in meta:
            names = json.loads(meta["names"])
        if meta.get("imgsz", "").isdigit():
            imgsz = int(meta["imgsz"])
        data = meta.get("data") or None
    cfg = json.loads(meta["yaml"]) if "yaml" in meta else None
    return tensors, cfg, names, imgsz, data


def reference_model(src, yaml=None, nc=None):
    """The reference's SegmentationModel with the weights of lucid weights or a training checkpoint
    (FP32, CPU), and the file's (model dict, class names, imgsz, data)."""
    from ultralytics.nn.tasks import SegmentationModel

    state, cfg, names, imgsz, data = read_lucid(src)
    if yaml is not None:
        cfg = yaml
    if cfg is None:
        sys.exit(f"{src}: no model dict in its metadata ('yaml'); give MODEL.yaml")
    if nc is None and names:
        nc = len(names)
    model = SegmentationModel(cfg, nc=nc, verbose=False)
    model.load_state_dict(state, strict=True)
    if names:
        model.names = {i: n for i, n in enumerate(names)}
    for p in model.parameters():
        p.requires_grad = False
    return model, cfg, names, imgsz, data


def write_pt(model, cfg, imgsz, data, dst):
    """An Ultralytics checkpoint of `model` (kept in its dtype), written atomically."""
    from ultralytics import __version__

    yaml_file = cfg if isinstance(cfg, str) else cfg.get("yaml_file", "")
    train_args = {"model": yaml_file, "task": "segment"}
    if imgsz:
        train_args["imgsz"] = imgsz
    if data:
        train_args["data"] = data
    ckpt = {"model": model, "epoch": -1, "best_fitness": None, "optimizer": None, "ema": None, "updates": None,
            "train_args": train_args, "version": __version__}
    tmp = f"{dst}.tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, dst)


def to_pt(yaml, src, dst, nc, fp32):
    model, cfg, _, imgsz, data = reference_model(src, yaml, nc)
    write_pt(model if fp32 else model.half(), cfg, imgsz, data, dst)
    print(f"{src} -> {dst}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-safetensors")
    a.add_argument("src")
    a.add_argument("dst")
    b = sub.add_parser("to-pt")
    b.add_argument("paths", nargs="+", metavar="[MODEL.yaml] IN.safetensors OUT.pt")
    b.add_argument("--nc", type=int, default=None)
    b.add_argument("--fp32", action="store_true", help="keep float32 (the reference stores fp16)")
    args = p.parse_args(argv)
    if args.cmd == "to-safetensors":
        to_safetensors(args.src, args.dst)
    else:
        if len(args.paths) not in (2, 3):
            p.error("to-pt takes [MODEL.yaml] IN.safetensors OUT.pt")
        yaml = args.paths[0] if len(args.paths) == 3 else None
        to_pt(yaml, *args.paths[-2:], args.nc, args.fp32)


if __name__ == "__main__":
    main(sys.argv[1:])
