#!/usr/bin/env python3
"""Weights interchange with the Ultralytics package (safetensors in the middle).

  to-safetensors IN.pt OUT.safetensors            an Ultralytics checkpoint -> lucid weights
  to-pt MODEL.yaml IN.safetensors OUT.pt [--nc N] [--fp32]
                                                   lucid weights -> an Ultralytics checkpoint

State-dict names are identical on both sides, so the conversion is a strict name-for-name copy.
"""
import argparse
import sys

import torch
from safetensors.torch import load_file, save_file


def to_safetensors(src, dst):
    ckpt = torch.load(src, map_location="cpu", weights_only=False)
    model = ckpt.get("ema") or ckpt["model"] if isinstance(ckpt, dict) else ckpt
    state = {k: v.detach().float().contiguous() if v.is_floating_point() else v.contiguous()
             for k, v in model.state_dict().items()}
    meta = {"source": src, "nc": str(getattr(model, "nc", "")), "yaml": str(getattr(model, "yaml", {}).get("yaml_file", ""))}
    save_file(state, dst, metadata=meta)
    print(f"{src} -> {dst}: {len(state)} tensors")


def to_pt(yaml, src, dst, nc, fp32):
    from ultralytics.nn.tasks import SegmentationModel

    model = SegmentationModel(yaml, nc=nc, verbose=False)
    missing, unexpected = model.load_state_dict(load_file(src), strict=True)
    model = model if fp32 else model.half()
    for p in model.parameters():
        p.requires_grad = False
    ckpt = {"model": model, "epoch": -1, "best_fitness": None, "optimizer": None, "ema": None, "updates": None,
            "train_args": {"model": yaml, "task": "segment"}}
    torch.save(ckpt, dst)
    print(f"{src} -> {dst}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-safetensors")
    a.add_argument("src")
    a.add_argument("dst")
    b = sub.add_parser("to-pt")
    b.add_argument("yaml")
    b.add_argument("src")
    b.add_argument("dst")
    b.add_argument("--nc", type=int, default=None)
    b.add_argument("--fp32", action="store_true", help="keep float32 (the reference stores fp16)")
    args = p.parse_args(argv)
    if args.cmd == "to-safetensors":
        to_safetensors(args.src, args.dst)
    else:
        to_pt(args.yaml, args.src, args.dst, args.nc, args.fp32)


if __name__ == "__main__":
    main(sys.argv[1:])
