"""What a convolution's first cuDNN pass spends its seconds on: the first forward and backward of a
set of yolo26n-seg-like convolutions (BF16, channels_last, deterministic algorithms, as a fit runs),
timed per convolution, in one process per setting:

    python bench/cudnn_probe.py [default|log|nondet] [batch]

default: as a fit runs; log: cuDNN's API log of the first convolution (CUDNN_LOGLEVEL_DBG=3,
CUDNN_LOGDEST_DBG=FILE set by the caller), summarised as the calls that took longest; nondet:
without deterministic algorithms.
Prints the seconds of each first pass and of a repeat, and which cuDNN and NVRTC libraries the
process loaded."""
import os
import re
import sys
import time

import torch

# (in channels, out channels, kernel, stride, groups, input size) of yolo26n-seg's kinds of layer
CONVS = [(3, 16, 3, 2, 1, 640), (16, 32, 3, 2, 1, 320), (32, 32, 1, 1, 1, 160), (16, 16, 3, 1, 1, 160),
         (64, 64, 3, 2, 1, 160), (64, 64, 1, 1, 1, 80), (128, 128, 3, 2, 1, 80), (128, 128, 1, 1, 1, 40),
         (256, 256, 3, 2, 1, 40), (256, 256, 1, 1, 1, 20), (64, 64, 3, 1, 64, 80), (128, 128, 3, 1, 128, 40),
         (256, 256, 3, 1, 256, 20), (64, 80, 3, 1, 1, 80), (64, 32, 3, 1, 1, 160)]


def conv_pass(batch, cin, cout, k, s, g, hw):
    x = torch.rand(batch, cin, hw, hw, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    w = torch.rand(cout, cin // g, k, k, device="cuda", dtype=torch.bfloat16)
    w = w.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    y = torch.nn.functional.conv2d(x, w, None, s, k // 2, 1, g)
    torch.autograd.grad(y, [x, w], torch.ones_like(y))
    torch.cuda.synchronize()
    return time.perf_counter() - t


def loaded_libraries():
    with open("/proc/self/maps") as f:
        names = {os.path.basename(line.split()[-1]) for line in f if ".so" in line}
    return sorted(n for n in names if "cudnn" in n or "nvrtc" in n)


def summarise_log(path, top=15):
    """cuDNN's API log: every entry starts with 'I! CuDNN (v...) function NAME() called:' and holds a
    'Time:' line; the gap to the next entry is charged to the entry."""
    entries = []
    name = None
    for line in open(path, errors="replace"):
        m = re.search(r"function (\w+)\(\) called", line)
        if m:
            name = m.group(1)
        m = re.search(r"Time: \S+T(\d+):(\d+):([\d.]+)", line)
        if m and name:
            entries.append((name, int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))))
            name = None
    per = {}
    for (n, t0), (_, t1) in zip(entries, entries[1:]):
        c, s = per.get(n, (0, 0.0))
        per[n] = (c + 1, s + t1 - t0)
    print(f"log: {len(entries)} API calls over {entries[-1][1] - entries[0][1]:.2f} s" if entries else "log: empty")
    for n, (c, s) in sorted(per.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"log: {s:7.3f} s in {c:5d} calls of {n}")


def main():
    setting = sys.argv[1] if len(sys.argv) > 1 else "default"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    torch.backends.cudnn.benchmark = False
    if setting != "nondet":
        torch.use_deterministic_algorithms(True)
    torch.zeros(1, device="cuda")
    print(f"{setting}: cuDNN {torch.backends.cudnn.version()}, torch {torch.__version__}", flush=True)
    convs = CONVS[:1] if setting == "log" else CONVS
    first = [conv_pass(batch, *c) for c in convs]
    again = [conv_pass(batch, *c) for c in convs]
    for c, f, a in zip(convs, first, again):
        print(f"{setting}: {c}: first {f * 1000:8.1f} ms, again {a * 1000:6.2f} ms", flush=True)
    print(f"{setting}: batch {batch}: {len(convs)} convolutions, first passes {sum(first):.2f} s, "
          f"repeats {sum(again) * 1000:.1f} ms", flush=True)
    second = [conv_pass(batch * 2, *c) for c in convs]
    print(f"{setting}: batch {batch * 2} (a new shape): first passes {sum(second):.2f} s", flush=True)
    print(f"{setting}: loaded {loaded_libraries()}", flush=True)
    if setting == "log":
        summarise_log(os.environ["CUDNN_LOGDEST_DBG"])


if __name__ == "__main__":
    main()
