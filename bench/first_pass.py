"""Where a new input shape's first training pass goes: yolo26n-seg (the reference's module, built from
its YAML) forward and backward under BF16 autocast, channels_last, deterministic algorithms, timed
for each shape's first pass and for a repeat, in one process per setting:

    python bench/first_pass.py [cudnn|nocudnn|nondet|thread|convs|parallel|dwnchw|signatures|signatures-dwnchw]
        [label]   (default cudnn)

cudnn: as a fit runs; nocudnn: torch.backends.cudnn.enabled = False (convolutions without cuDNN);
nondet: cuDNN without deterministic algorithms; thread: the batch-4 pass first in another thread,
then on this one (whether what a first pass sets up is shared across threads); convs: the first
forward of every convolution timed on its own (which convolutions the set-up cost sits in);
signatures: the first forward and backward of every distinct convolution timed on its own, then the
whole network's first pass (signatures-dwnchw: the depthwise ones on contiguous tensors). The
cuDNN environment (TORCH_CUDNN_V8_API_DISABLED, TORCH_CUDNN_USE_HEURISTIC_MODE_B, CUDA_CACHE_PATH)
is the caller's; label names it in the output. Prints one line per pass: the shape, and its seconds
(device synchronised)."""
import sys
import threading
import time

import torch


def main():
    setting = sys.argv[1] if len(sys.argv) > 1 else "cudnn"
    label = sys.argv[2] if len(sys.argv) > 2 else setting
    torch.backends.cudnn.enabled = setting != "nocudnn"
    torch.backends.cudnn.benchmark = False
    if setting != "nondet":
        torch.use_deterministic_algorithms(True)
    from ultralytics.nn.tasks import SegmentationModel

    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(f"{label}: CUDA context {time.perf_counter() - t0:.2f} s, cuDNN {torch.backends.cudnn.version()}",
          flush=True)
    model = SegmentationModel("yolo26n-seg.yaml", nc=80, verbose=False).cuda().train()
    model = model.to(memory_format=torch.channels_last)
    if setting == "convs":
        return _time_convs(model, label)
    if setting == "parallel":
        threads = int(sys.argv[3]) if len(sys.argv) > 3 else 8
        convs = _conv_signatures(model)
        for batch in (4, 32, 64):
            t = time.perf_counter()
            _warm_in_threads(convs, batch, threads)
            print(f"{label}: batch {batch}: {len(convs)} convolutions set up in {threads} threads "
                  f"{time.perf_counter() - t:.2f} s", flush=True)
            _timed_pass(model, batch, label)
            _timed_pass(model, batch, label)
        return
    if setting in ("signatures", "signatures-dwnchw"):
        return _time_signatures(model, label, setting == "signatures-dwnchw")
    if setting == "dwnchw":
        _depthwise_in_nchw(model)
    if setting == "thread":
        worker = threading.Thread(target=_timed_pass, args=(model, 4, f"{label} (other thread)"))
        worker.start()
        worker.join()
    for batch in (4, 4, 32, 32, 64):
        _timed_pass(model, batch, label)
    steady = sorted(_timed_pass(model, 64, None) for _ in range(15))
    print(f"{label}: batch 64 steady: median {steady[7] * 1000:.1f} ms ({steady[0] * 1000:.1f}-"
          f"{steady[-1] * 1000:.1f})", flush=True)
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "cudnn_engines" in line or "nvrtc.so" in line})
    print(f"{label}: loaded {libs}", flush=True)


def _depthwise_in_nchw(model):
    """Depthwise convolutions (groups == channels) on contiguous tensors, the rest channels_last:
    ATen then runs them with its own depthwise kernels instead of cuDNN's."""
    import types

    def forward(self, x):
        w = self.weight.contiguous()
        y = torch.nn.functional.conv2d(x.contiguous(), w, self.bias, self.stride, self.padding,
                                       self.dilation, self.groups)
        return y.contiguous(memory_format=torch.channels_last)

    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels:
            m.forward = types.MethodType(forward, m)
            n += 1
    print(f"{n} depthwise convolutions on contiguous tensors", flush=True)


def _timed_pass(model, batch, label):
    x = torch.rand(batch, 3, 640, 640, device="cuda").contiguous(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
    loss = sum(o.float().sum() for o in _tensors(out))
    loss.backward()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    if label:
        print(f"{label}: batch {batch}: {seconds:.2f} s", flush=True)
    return seconds


def _conv_signatures(model):
    """Every distinct convolution of a batch-1 forward: its input's channels and size, its weight's
    shape and its stride, padding, dilation and groups, and whether its input needs a gradient."""
    seen = {}

    def record(module, args):
        x = args[0]
        key = (tuple(x.shape[1:]), tuple(module.weight.shape), module.stride, module.padding,
               module.dilation, module.groups, module.bias is not None, x.requires_grad)
        seen[key] = True

    hooks = [m.register_forward_pre_hook(record) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    torch.backends.cudnn.enabled = False
    with torch.autocast("cuda", dtype=torch.bfloat16):
        x = torch.rand(1, 3, 640, 640, device="cuda")
        model(x.contiguous(memory_format=torch.channels_last))
    torch.backends.cudnn.enabled = True
    for h in hooks:
        h.remove()
    return list(seen)


def _warm_in_threads(convs, batch, threads):
    """Forward and backward of each signature at this batch, the signatures dealt over threads."""
    def warm(part):
        for shape, wshape, stride, padding, dilation, groups, bias, needs_grad in part:
            x = torch.rand(batch, *shape, device="cuda", dtype=torch.bfloat16)
            x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
            w = torch.rand(wshape, device="cuda", dtype=torch.bfloat16)
            w = w.contiguous(memory_format=torch.channels_last).requires_grad_(True)
            b = torch.rand(wshape[0], device="cuda", dtype=torch.bfloat16, requires_grad=True) if bias else None
            y = torch.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups)
            inputs = [x, w] if needs_grad else [w]
            torch.autograd.grad(y, inputs, torch.ones_like(y))
        torch.cuda.synchronize()

    if threads == 0:  # on this thread
        return warm(convs)
    parts = [convs[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=warm, args=(part,)) for part in parts]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def _time_signatures(model, label, depthwise_nchw):
    """The first forward and backward of every distinct convolution at batch 4 on this thread, each
    timed on its own, then the whole network's first pass at batch 4 (what the warm-up left)."""
    convs = _conv_signatures(model)
    if depthwise_nchw:  # those run on ATen's kernels: nothing of cuDNN's to set up
        _depthwise_in_nchw(model)
        convs = [sig for sig in convs if not (sig[5] > 1 and sig[5] == sig[0][0])]
    times = []
    for sig in convs:
        t = time.perf_counter()
        _warm_in_threads([sig], 4, 0)
        times.append((time.perf_counter() - t, sig))
    dw = [t for t, sig in times if sig[5] > 1 and sig[5] == sig[0][0]]
    print(f"{label}: {len(convs)} signatures set up in {sum(t for t, _ in times):.2f} s, of which "
          f"{len(dw)} depthwise {sum(dw):.2f} s", flush=True)
    for t, sig in sorted(times, key=lambda ts: -ts[0])[:12]:
        print(f"{label}: {t * 1000:7.1f} ms  {sig}", flush=True)
    _timed_pass(model, 4, f"{label} whole network after")
    _timed_pass(model, 4, f"{label} whole network again")


def _time_convs(model, label):
    """The first forward of each convolution at batch 4, synchronised around it."""
    times = []

    def before(module, args):
        torch.cuda.synchronize()
        module._t = time.perf_counter()

    def after(module, args, out):
        torch.cuda.synchronize()
        x = args[0]
        times.append((time.perf_counter() - module._t, module.in_channels, module.out_channels,
                      module.kernel_size[0], module.stride[0], module.groups, tuple(x.shape[2:])))

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.register_forward_pre_hook(before)
            m.register_forward_hook(after)
    x = torch.rand(4, 3, 640, 640, device="cuda").contiguous(memory_format=torch.channels_last)
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        model(x)
    torch.cuda.synchronize()
    total = time.perf_counter() - t
    print(f"{label}: first forward {total:.2f} s over {len(times)} convolutions, "
          f"{sum(t[0] for t in times):.2f} s in them", flush=True)
    for t, cin, cout, k, s, g, hw in sorted(times, reverse=True)[:15]:
        print(f"{label}: {t * 1000:7.1f} ms  {cin}->{cout} k{k} s{s} groups {g} at {hw}", flush=True)
    slow = [t for t in times if t[0] > 0.05]
    print(f"{label}: {len(slow)} convolutions over 50 ms, {sum(t[0] for t in slow):.2f} s", flush=True)


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
