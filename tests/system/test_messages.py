"""Options, weights and messages (docs/reliability.md, third round, "Options, weights and
messages"), each as a user meets it at the command line, on the `lucid` binary of LUCID_BUILD_DIR
(default build/): detections bounded by the network's candidates under `ulimit -v` with the
child's peak RSS measured; every refusal one line naming the option, file or variable, exit 1, no
signal, no library text. The .pt files are written with the ultralytics package of the environment
(those checks are skipped without it); the full disk is a small tmpfs (skipped where it cannot be
mounted)."""
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import lucid_runs  # noqa: E402
from lucid_runs import LUCID, check, failures, synth_data  # noqa: E402

TIMEOUT = 120
CAP = 4 << 30  # ulimit -v of every run
LIBRARY_TEXT = ("Sizes of tensors", "bad file", "element 0 of tensors", "frame #", "not linked with support",
                "c10::", "std::", "terminate called", "bad_alloc", "alias")


class Run(lucid_runs.Run):
    """A lucid command under ulimit -v CAP, refused only with exactly one error line and no library
    text anywhere in its stderr."""

    def __init__(self, args, env, timeout=TIMEOUT):
        super().__init__(args, env, cap=CAP, timeout=timeout)

    def refused(self, *fragments):
        return (not self.timed_out and self.code == 1 and len(self.errors) == 1 and
                all(f in self.errors[0] for f in fragments) and not any(w in self.stderr for w in LIBRARY_TEXT))


def rewritten(src, dst, tensors=None, **meta):
    """A copy of weights file src with tensors changed by tensors(name, array) and metadata keys set."""
    with safe_open(str(src), "np") as f:
        m = dict(f.metadata() or {}, **meta)
        t = {k: (tensors(k, f.get_tensor(k)) if tensors else f.get_tensor(k)) for k in f.keys()}
    save_file(t, str(dst), metadata=m)
    return dst


def detections_bounded(tmp, env, weights, data):
    """Item 8: max_det beyond the candidates, in predict and val, within bounded memory."""
    image = tmp / "small.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (128, 160, 3), dtype=np.uint8)).save(image)
    r = Run(["predict", f"model={weights}", f"source={image}", "conf=0", "max_det=1000000000", "imgsz=640",
             "device=cpu", f"project={tmp / 'pred'}", "name=maxdet"], env)
    check(r.code == 0 and r.peak < (2 << 30), f"8 predict conf=0 max_det=1000000000, 160x128 at imgsz 640: {r}")
    r = Run(["val", f"model={weights}", f"data={data}", "max_det=1048576", "imgsz=640", "batch=4", "device=cpu",
             "plots=False", f"project={tmp / 'val'}", "name=maxdet"], env, timeout=300)
    check(r.code == 0 and r.peak < (2 << 30), f"8 val max_det=1048576 on 4 images: {r}")


def pt_with_imgsz(path, value):
    """An Ultralytics checkpoint of yolo26n-seg whose train_args.imgsz is value."""
    code = ("import sys, torch\nfrom ultralytics import YOLO\n"
            "m = YOLO('yolo26n-seg.yaml').model.half()\n"
            f"torch.save({{'epoch': -1, 'model': m, 'ema': None, 'train_args': {{'imgsz': {value}}}}}, sys.argv[1])\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          env=dict(os.environ, YOLO_OFFLINE="1")).returncode == 0


def weights_fields(tmp, env, weights, data):
    """Items 9 and 11a: NaN outputs in val, train_args.imgsz of the wrong type, imgsz off the stride."""
    stats = ("running_mean", "running_var", "num_batches_tracked")
    hot = rewritten(weights, tmp / "hot.safetensors",
                    lambda k, a: np.full_like(a, 3e38) if a.dtype == np.float32 and not k.endswith(stats) else a)
    r = Run(["val", f"model={hot}", f"data={data}", "imgsz=64", "device=cpu", "plots=False",
             f"project={tmp / 'val'}", "name=hot"], env)
    check(r.refused(f"model={hot}", "NaN or infinite"), f"9 val of weights whose every output is NaN: {r}")
    for value, shown in (("'abc'", '"abc"'), ("640.5", "640.5"), ("float('nan')", "nan")):
        pt = tmp / "imgsz.pt"
        if not pt_with_imgsz(pt, value):
            print(f"skipped: a .pt with train_args.imgsz={value} (no ultralytics/torch here)")
            continue
        r = Run(["predict", f"model={pt}", f"source={tmp / 'small.png'}", "device=cpu", f"project={tmp / 'pred'}"],
                env)
        check(r.refused(str(pt), f"train_args.imgsz {shown}"), f"9 a .pt with train_args.imgsz={value}: {r}")
    for stored, used in (("100", "128"), ("33", "64"), ("1", "32")):
        odd = rewritten(weights, tmp / f"imgsz{stored}.safetensors", imgsz=stored)
        for command in (["predict", f"source={tmp / 'small.png'}", "save=False"], ["val", f"data={data}", "plots=False"]):
            r = Run([command[0], f"model={odd}", *command[1:], "device=cpu", f"project={tmp / 'runs'}"], env)
            warned = f"{odd}: its metadata imgsz={stored} must be a multiple of max stride 32, updating to {used}"
            check(r.code == 0 and warned in r.stderr and not any(w in r.stderr for w in LIBRARY_TEXT),
                  f"11a imgsz {stored} in a weights file, {command[0]}: {r}")


def options(tmp, env, weights, data):
    """Items 11b, 11c, 11h: device=mps, freeze=1000, LUCID_AVAILABLE_MEMORY."""
    image = tmp / "small.png"
    r = Run(["predict", f"model={weights}", f"source={image}", "device=mps", f"project={tmp / 'pred'}"], env)
    check(r.refused("option device=mps"), f"11b device=mps: {r}")
    train = ["train", "model=yolo26n-seg.yaml", f"data={data}", "epochs=1", "batch=4", "imgsz=64", "workers=0",
             "device=cpu", "plots=False", f"project={tmp / 'train'}"]
    r = Run([*train, "freeze=1000"], env)
    check(r.refused("option freeze=1000", "layers"), f"11c freeze=1000: {r}")
    predict = ["predict", f"model={weights}", f"source={image}", "conf=0", "device=cpu", f"project={tmp / 'pred'}"]
    r = Run(predict, dict(env, LUCID_AVAILABLE_MEMORY="0"))
    check(r.refused("0 bytes are available"), f"11h LUCID_AVAILABLE_MEMORY=0: {r}")
    r = Run(predict, dict(env, LUCID_AVAILABLE_MEMORY="12 GB"))
    check(r.refused("LUCID_AVAILABLE_MEMORY=12 GB"), f"11h LUCID_AVAILABLE_MEMORY='12 GB': {r}")


def rendezvous(tmp, env, weights, data):
    """Item 11d: a rank whose rendezvous nobody listens at."""
    with socket.socket() as s:  # a port free now, so nobody listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launched = dict(env, RANK="1", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    r = Run(["train", "model=yolo26n-seg.yaml", f"data={data}", "epochs=1", "batch=4", "imgsz=64", "workers=0",
             "device=cpu", "plots=False", "dist_timeout=3", f"project={tmp / 'dist'}"], launched)
    check(r.refused("MASTER_ADDR=127.0.0.1", f"MASTER_PORT={port}"), f"11d RANK=1 WORLD_SIZE=2, nobody listening: {r}")


def yaml_files(tmp, env):
    """Items 11e and 11f: a 100,000-deep YAML, a million class names."""
    deep = tmp / "deep.yaml"
    deep.write_text("[" * 100000 + "]" * 100000)
    r = Run(["data", "check", f"data={deep}"], env)
    check(r.refused(f"{deep}:1:", "levels deep"), f"11e a 100,000-deep YAML: {r}")
    maps = tmp / "maps.yaml"
    maps.write_text("train: " + "{a: " * 100000 + "1" + "}" * 100000 + "\n")
    r = Run(["data", "check", f"data={maps}"], env)
    check(r.refused(f"{maps}:1:", "levels deep"), f"11e 100,000 nested mappings: {r}")
    many = tmp / "names.yaml"
    many.write_text("path: .\ntrain: images\nval: images\nnames:\n" + "  - c\n" * 1000000)
    r = Run(["data", "check", f"data={many}"], env)
    check(r.refused(str(many), "more than 1000000 entries"), f"11f a million class names: {r}")
    some = tmp / "some.yaml"
    some.write_text("path: .\ntrain: images\nval: images\nnames:\n" + "  - c\n" * 100001)
    r = Run(["data", "check", f"data={some}"], env)
    check(r.refused(str(some), "100001 classes, more than the 100000"), f"11f 100,001 class names: {r}")


def full_disk(tmp, env):
    """Item 11g: a write into a full filesystem (a 1 MiB tmpfs)."""
    full = tmp / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(full)], capture_output=True).returncode:
        print("skipped: the full-disk check (a tmpfs cannot be mounted here)")
        return
    try:
        out = full / "w.safetensors"
        r = Run(["model", "save", "model=yolo26n-seg.yaml", f"out={out}"], env)
        check(r.refused("no space left on device", str(out)) and ".tmp." not in r.errors[0] and
              not list(full.iterdir()), f"11g model save into a full filesystem: {r}")
    finally:
        subprocess.run(["umount", str(full)], check=False)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), OMP_NUM_THREADS="2")
        for k in ("LUCID_FAULT_AT", "LUCID_AVAILABLE_MEMORY", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        print(f"lucid: {LUCID}", flush=True)
        data = synth_data(tmp / "data", env, n_train=4, n_val=4, imgsz=640)
        weights = tmp / "w.safetensors"
        subprocess.run([str(LUCID), "model", "save", "model=yolo26n-seg.yaml", "nc=3", f"out={weights}"], env=env,
                       check=True, capture_output=True)
        detections_bounded(tmp, env, weights, data)
        weights_fields(tmp, env, weights, data)
        options(tmp, env, weights, data)
        rendezvous(tmp, env, weights, data)
        yaml_files(tmp, env)
        full_disk(tmp, env)
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
