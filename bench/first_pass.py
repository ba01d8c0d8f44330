"""Where a new input shape's first training pass goes: yolo26n-seg (the reference's module, built from
its YAML) forward and backward under BF16 autocast, channels_last, deterministic algorithms, timed
for each shape's first pass and for a repeat, in one process per setting:

    python bench/first_pass.py [cudnn|nocudnn|nondet]   (default cudnn)

cudnn: as a fit runs; nocudnn: torch.backends.cudnn.enabled = False (convolutions without cuDNN);
nondet: cuDNN without deterministic algorithms. Prints one line per pass: the shape, first or repeat,
and its seconds (device synchronised)."""
import sys
import time

import torch


def main():
    setting = sys.argv[1] if len(sys.argv) > 1 else "cudnn"
    torch.backends.cudnn.enabled = setting != "nocudnn"
    torch.backends.cudnn.benchmark = False
    if setting != "nondet":
        torch.use_deterministic_algorithms(True)
    from ultralytics.nn.tasks import SegmentationModel

    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(f"{setting}: CUDA context {time.perf_counter() - t0:.2f} s", flush=True)
    model = SegmentationModel("yolo26n-seg.yaml", nc=80, verbose=False).cuda().train()
    model = model.to(memory_format=torch.channels_last)
    for batch in (4, 4, 32, 32, 64):
        x = torch.rand(batch, 3, 640, 640, device="cuda").contiguous(memory_format=torch.channels_last)
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss = sum(o.float().sum() for o in _tensors(out))
        loss.backward()
        torch.cuda.synchronize()
        print(f"{setting}: batch {batch}: {time.perf_counter() - t:.2f} s", flush=True)


def _tensors(out):
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, dict):
        for v in out.values():
            yield from _tensors(v)
    elif isinstance(out, (list, tuple)):
        for v in out:
            yield from _tensors(v)


if __name__ == "__main__":
    main()
