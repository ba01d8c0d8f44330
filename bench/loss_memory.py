"""Peak memory (max RSS) of one loss call with its backward on the CPU, through loss_oracle_tool:
one batch of the loss oracle's scenes (crowded: 30 instances, tiny, large, single, repeated) at a
given batch size and input size, for yolo11n-seg (reg_max 16) and yolo26n-seg (end2end, semantic).
Compare two builds of the tool (e.g. before and after a change to the loss):

    .venv/bin/python bench/loss_memory.py build/tests/loss_oracle_tool [OTHER_TOOL ...] [--batch 16 --size 640]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "oracle"))
import test_loss_oracle as oracle  # noqa: E402


def case_inputs(name, bs, size):
    m = oracle.MODELS[name]
    g = torch.Generator().manual_seed(0)
    kinds = (["crowded", "tiny", "large", "single"] * bs)[:bs]
    t = oracle.make_targets(g, kinds, size, size)
    c = "c0"
    inputs = {f"{c}.o2m.{k}": v for k, v in oracle.make_preds(g, bs, size, size, m["reg_max"], m["e2e"]).items()}
    if m["e2e"]:
        o2o = oracle.make_preds(g, bs, size, size, m["reg_max"], False)
        inputs.update({f"{c}.o2o.{k}": o2o[k] for k in ("boxes", "scores", "mask_coefficient")})
    for i, (a, b) in enumerate(oracle.levels(size, size)):
        inputs[f"{c}.feat{i}"] = torch.zeros(bs, 1, a, b)
    for key in ("batch_idx", "cls", "bboxes", "sem_masks"):
        inputs[f"{c}.{key}"] = t[key]
    inputs[f"{c}.masks"] = t["overlap_masks"]
    cfg = {"nc": oracle.NC, "reg_max": m["reg_max"], "end2end": int(m["e2e"]), "overlap": 1, "epochs": 10, "updates": 0}
    for key, v in cfg.items():
        inputs[f"{c}.cfg.{key}"] = torch.tensor([v], dtype=torch.int64)
    inputs[f"{c}.cfg.strides"] = torch.tensor(oracle.STRIDES, dtype=torch.float64)
    counts = torch.bincount(t["batch_idx"].long(), minlength=bs)
    return inputs, int(counts.max())


def peak_rss_mib(tool, src, dst):
    p = subprocess.Popen([str(tool), "loss", str(src), str(dst)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{tool} failed: {p.stderr.read().decode()}")
    return usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tools", nargs="+")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=640)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in oracle.MODELS:
            inputs, max_count = case_inputs(name, args.batch, args.size)
            src = tmp / f"{name}.safetensors"
            save_file({k: v.contiguous() for k, v in inputs.items()}, src)
            mib = sum(v.numel() * v.element_size() for v in inputs.values()) / 2**20
            print(f"{name}: batch {args.batch}, {args.size} px, fullest image {max_count} instances, inputs {mib:.0f} MiB")
            for tool in args.tools:
                print(f"  {tool}: peak RSS {peak_rss_mib(tool, src, tmp / 'out.safetensors'):.0f} MiB")


if __name__ == "__main__":
    main()
