"""What a new input shape costs prediction's convolutions: the first forward (no gradient, BF16
autocast, channels_last, as `lucid predict` runs) of yolo26m-seg's kinds of convolution at five
letterbox shapes, against a repeat, per kind, in one process per setting:

    python bench/predict_first_forward.py [cudnn|matmul|nocudnn ...]   (default: all three, each in a child)

cudnn: as lucid runs; matmul: the 1x1 convolutions as a matrix product on the channels_last layout
(no cuDNN plan), the others on cuDNN; nocudnn: torch.backends.cudnn.enabled = False."""
import subprocess
import sys
import time

import torch

# (kind, in channels, out channels, kernel, stride, groups, stride level of the input)
CONVS = [("stem", 3, 64, 3, 2, 1, 1), ("3x3s2", 64, 128, 3, 2, 1, 2), ("3x3s2", 256, 256, 3, 2, 1, 4),
         ("3x3s2", 512, 512, 3, 2, 1, 8), ("3x3s2", 512, 512, 3, 2, 1, 16),
         ("1x1", 128, 128, 1, 1, 1, 4), ("1x1", 256, 256, 1, 1, 1, 4), ("1x1", 256, 256, 1, 1, 1, 8),
         ("1x1", 512, 512, 1, 1, 1, 8), ("1x1", 512, 512, 1, 1, 1, 16), ("1x1", 512, 512, 1, 1, 1, 32),
         ("1x1", 768, 256, 1, 1, 1, 8), ("1x1", 1024, 512, 1, 1, 1, 32),
         ("3x3", 64, 64, 3, 1, 1, 4), ("3x3", 128, 128, 3, 1, 1, 8), ("3x3", 128, 128, 3, 1, 1, 16),
         ("3x3", 256, 256, 3, 1, 1, 32), ("3x3", 256, 64, 3, 1, 1, 8), ("3x3", 128, 32, 3, 1, 1, 4),
         ("dw", 256, 256, 3, 1, 256, 8), ("dw", 512, 512, 3, 1, 512, 16), ("dw", 512, 512, 3, 1, 512, 32)]
SHAPES = [(480, 640), (640, 480), (448, 640), (640, 512), (384, 640)]


def conv(setting, x, w, k, s, g):
    if setting == "matmul" and k == 1 and g == 1 and s == 1:
        y = x.permute(0, 2, 3, 1).reshape(-1, x.shape[1]) @ w.view(w.shape[0], -1).t()
        return y.view(x.shape[0], x.shape[2], x.shape[3], -1).permute(0, 3, 1, 2)
    return torch.nn.functional.conv2d(x, w, None, s, k // 2, 1, g)


def timed(setting, shape, spec):
    kind, cin, cout, k, s, g, level = spec
    h, w_ = shape[0] // level, shape[1] // level
    x = torch.rand(1, cin, h, w_, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    w = torch.rand(cout, cin // g, k, k, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    out = []
    for _ in range(2):
        torch.cuda.synchronize()
        t = time.perf_counter()
        conv(setting, x, w, k, s, g)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return kind, out


def child(setting):
    torch.backends.cudnn.enabled = setting != "nocudnn"
    torch.backends.cudnn.benchmark = False
    torch.set_grad_enabled(False)
    t = time.perf_counter()
    timed(setting, (64, 64), ("3x3", 16, 16, 3, 1, 1, 1))  # the library's own start-up
    print(f"{setting}: first convolution of the process {1e3 * (time.perf_counter() - t):.1f} ms")
    for shape in SHAPES:
        kinds = {}
        for spec in CONVS:
            kind, (first, again) = timed(setting, shape, spec)
            a = kinds.setdefault(kind, [0.0, 0.0, 0])
            a[0] += first
            a[1] += again
            a[2] += 1
        total = sum(v[0] for v in kinds.values())
        parts = ", ".join(f"{k} x{v[2]} {v[0]:.1f} ({v[1]:.2f})" for k, v in kinds.items())
        print(f"{setting} {shape[0]}x{shape[1]}: first forwards {total:.1f} ms: {parts}  [ms first (again)]", flush=True)


if __name__ == "__main__":
    settings = sys.argv[1:] or ["cudnn", "matmul", "nocudnn"]
    if len(settings) == 1:
        child(settings[0])
    else:
        for s in settings:
            subprocess.run([sys.executable, __file__, s], check=False)
