"""The second hardening round's defects (docs/reliability.md, "Special files, unbounded allocations
and records"), each as a user meets it at the command line: one check per defect, on the `lucid`
binary of LUCID_BUILD_DIR (default build/). The unit tests named in docs/reliability.md pin each
fix at its function; this script pins what the command does, so that run against a binary built
from before the fixes it fails every one of its checks (docs/reliability.md says which build was
tried). Helper tools (hostile_files_tool, video_tool) come from LUCID_TOOLS_DIR (default
build/tests). Device-node copies need root (mknod in a temporary folder); without root those
checks are skipped and said to be."""
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, LUCID, Run, check, failures, synth_data  # noqa: E402

TOOLS = Path(os.environ.get("LUCID_TOOLS_DIR", BUILD_DIR / "tests"))
TIMEOUT = 60
CAP = 6 << 30  # ulimit -v for the runs whose defect was a runaway allocation
ROOT = os.geteuid() == 0


def node_copy(path, which):
    """A copy of /dev/null (1, 3) or /dev/zero (1, 5) at path."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, which))
    return path


def leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir() if ".tmp." in p.name)


def out_targets(tmp, env):
    """Defect 1 (and 6's leftover temporaries): out= never replaces what is not a regular file."""
    d = tmp / "out"
    d.mkdir()
    save = ["model", "save", "model=yolo26n-seg.yaml"]
    os.mkfifo(d / "fifo")
    r = Run([*save, f"out={d / 'fifo'}"], env)
    check(r.refused("fifo") and stat.S_ISFIFO(os.lstat(d / "fifo").st_mode), f"1 out=a fifo: {r}")
    (d / "folder").mkdir()
    r = Run([*save, f"out={d / 'folder'}"], env)
    check(r.refused("folder") and (d / "folder").is_dir() and not leftovers(d),
          f"1/6 out=a folder, no temporary left ({leftovers(d)}): {r}")
    (d / "target.safetensors").write_bytes(b"old")
    os.symlink("target.safetensors", d / "link.safetensors")
    r = Run([*save, f"out={d / 'link.safetensors'}"], env)
    check(r.code == 0 and (d / "link.safetensors").is_symlink() and (d / "target.safetensors").stat().st_size > 1000,
          f"1 out=a symlink: the link kept, its file written ({r})")
    if not ROOT:
        print("skip 1 out=device node copies (needs root for mknod)")
        return
    for name, which in (("null", 3), ("zero", 5)):
        node = node_copy(d / name, which)
        r = Run([*save, f"out={node}"], env)
        check(r.refused("character device") and stat.S_ISCHR(os.lstat(node).st_mode),
              f"1 out=a copy of /dev/{name} left a device node: {r}")


def resume_finished(tmp, env, data):
    """Defect 2: resume= an earlier checkpoint of a finished run is refused and writes nothing; and
    defect 6's fraction past int64 trains on every image."""
    project = tmp / "runs"
    args = [f"data={data}", "batch=8", "imgsz=64", "workers=1", "device=cpu", "plots=False", f"project={project}"]
    r = Run(["train", *args, "epochs=1", "name=f", "fraction=99999999999999999999"], env, timeout=600)
    check(r.code == 0 and "vector::" not in r.stderr, f"6 fraction=99999999999999999999 trains on every image: {r}")
    r = Run(["train", *args, "epochs=2", "save_period=1", "name=r"], env, timeout=600)
    run = project / "r"
    if r.code != 0:
        check(False, f"2 the run to resume trained: {r}")
        return
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}
    r = Run(["train", f"resume={run / 'weights' / 'epoch1.safetensors'}", "epochs=3"], env, timeout=600)
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}
    check(r.refused("epoch1.safetensors", "last.safetensors") and after == before,
          f"2 resume=epoch1 epochs=3 on a finished run: refused, nothing rewritten: {r}")


def weights_bounds(tmp, env):
    """Defect 3: overlapping zip entries, architectures and YAML alias bombs bounded."""
    listing = subprocess.run([str(TOOLS / "hostile_files_tool"), str(tmp / "hostile"), "29", "12"], check=True,
                             capture_output=True, text=True).stdout.split("\n")
    files = dict(line.split()[:2] for line in filter(None, listing))
    r = Run(["model", "info", f"model={files['pt']}"], env, cap=CAP)
    check(r.refused(files["pt"], "overlaps another") and r.peak < (1 << 30),
          f"3 a .pt with overlapping entries, peak {r.peak >> 20} MiB: {r}")
    r = Run(["data", "check", f"data={files['dataset']}"], env, cap=CAP)
    check(r.refused(files["dataset"], "expands to more than"), f"3 an alias bomb in a dataset YAML: {r}")
    wide = tmp / "wide.yaml"
    wide.write_text("nc: 2\nbackbone:\n  - [-1, 1, Conv, [4096, 3, 2]]\n  - [-1, 1, Conv, [4096, 31, 1]]\n"
                    "head:\n  - [-1, 1, Conv, [64, 1, 1]]\n")
    r = Run(["model", "info", f"model={wide}"], env, cap=CAP)
    check(r.refused(str(wide), "parameters") and r.peak < (1 << 30),
          f"3/7 an architecture of 1.6e10 parameters, peak {r.peak >> 20} MiB: {r}")


def special_inputs(tmp, env):
    """Defect 4: special files given where a file is read are refused, never read."""
    os.mkfifo(tmp / "data.fifo")
    r = Run(["data", "check", f"data={tmp / 'data.fifo'}"], env, timeout=20)
    check(r.refused("data.fifo", "fifo"), f"4 data=a fifo: {r}")
    if not ROOT:
        print("skip 4 gt=a copy of /dev/zero (needs root for mknod)")
        return
    zero = node_copy(tmp / "zero", 5)
    r = Run(["coco-eval", f"gt={zero}", f"dt={zero}"], env, cap=CAP, timeout=20)
    check(r.refused(str(zero), "character device") and r.peak < (1 << 30), f"4 gt=a copy of /dev/zero: {r}")


def memory_checks(tmp, env, big):
    """Defects 5 and 7: cache=False holds nothing; cache=ram and unbounded detections are refused
    before they allocate, naming the figures."""
    project = tmp / "mem"
    base = [f"data={big}", "epochs=1", "batch=4", "imgsz=640", "workers=1", "device=cpu", "plots=False",
            f"project={project}", "exist_ok=True"]
    small = dict(env, LUCID_AVAILABLE_MEMORY="100000000")
    r = Run(["train", *base, "cache=ram", "name=ram_refused"], small, timeout=120)
    check(r.refused("bytes", "cache=disk", "cache=False"), f"5 cache=ram past the available memory: {r}")
    peaks = {}
    for mode in ("ram", "False"):
        peaks[mode] = peak_until_first_step(["train", *base, f"cache={mode}", f"name=c{mode}"], env)
    held = 300 * 640 * 480 * 3
    check(peaks["ram"] - peaks["False"] > held // 2,
          f"5 cache=False holds no images: peak {peaks['False'] >> 20} MiB against cache=ram's "
          f"{peaks['ram'] >> 20} MiB (the images: {held >> 20} MiB)")
    weights = tmp / "w.safetensors"
    Run(["model", "save", "model=yolo26n-seg.yaml", f"out={weights}"], env)
    image = next((big.parent / "images" / "val").iterdir())
    r = Run(["predict", f"model={weights}", f"source={image}", "conf=0", "max_det=1000000000", "device=cpu",
             f"project={tmp / 'pred'}"], dict(env, LUCID_AVAILABLE_MEMORY="4000000000"), cap=CAP, timeout=120)
    # Refused before allocating, or (masks made a chunk at a time since the third round) run within
    # the bound.
    check((r.refused("conf=", "max_det=") or r.code == 0) and r.peak < (2 << 30),
          f"7 predict conf=0 max_det=1000000000, peak {r.peak >> 20} MiB: {r}")
    return weights, image


def peak_until_first_step(args, env):
    """Peak RSS of a fit stopped as its training starts: the images prepared, the model and optimizer
    built, no step's memory yet (a peak taken after steps depends on how many ran before the kill)."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen([str(LUCID), *map(str, args)], env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while p.poll() is None and time.monotonic() < deadline:
            out.seek(0)
            if b"Starting training" in out.read():
                break
            time.sleep(0.02)
        p.send_signal(signal.SIGKILL)
        _, _, usage = os.wait4(p.pid, 0)
    return usage.ru_maxrss * 1024


def rewritten(src, dst, tensors=None, **meta):
    """A copy of weights file src with tensors changed by tensors(name, array) and metadata keys set."""
    with safe_open(str(src), "np") as f:
        m = dict(f.metadata() or {}, **meta)
        t = {k: (tensors(k, f.get_tensor(k)) if tensors else f.get_tensor(k)) for k in f.keys()}
    save_file(t, str(dst), metadata=m)
    return dst


def weights_and_outputs(tmp, env, weights, image):
    """Defect 8: imgsz from a file range-checked, NaN outputs said, a video's temporary removed on
    SIGTERM, control characters refused in what a run records."""
    bad = rewritten(weights, tmp / "imgsz.safetensors", imgsz="100000")
    r = Run(["predict", f"model={bad}", f"source={image}", "device=cpu", f"project={tmp / 'pred'}"], env, cap=CAP)
    check(r.refused(str(bad), "imgsz 100000"), f"8 imgsz=100000 in a weights file's metadata: {r}")
    stats = ("running_mean", "running_var", "num_batches_tracked")
    hot = rewritten(weights, tmp / "hot.safetensors",
                    lambda k, a: np.full_like(a, 3e38) if a.dtype == np.float32 and not k.endswith(stats) else a)
    r = Run(["predict", f"model={hot}", f"source={image}", "device=cpu", "imgsz=64", f"project={tmp / 'pred'}"], env)
    check(r.refused("NaN or infinite"), f"8 weights whose every output is NaN or infinite: {r}")
    video = tmp / "clip.avi"
    subprocess.run([str(TOOLS / "video_tool"), "write", str(video), "320", "240", "400"], check=True,
                   capture_output=True)
    folder = tmp / "vid"
    p = subprocess.Popen([str(LUCID), "predict", f"model={weights}", f"source={video}", "device=cpu", "imgsz=64",
                          f"project={folder}", "name=p"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(folder.rglob("*.tmp.*")) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = [q.name for q in folder.rglob("*.tmp.*")]
    p.send_signal(signal.SIGTERM)
    p.wait()
    check(bool(seen) and not list(folder.rglob("*.tmp.*")),
          f"8 predict stopped by SIGTERM while writing a video: temporaries {seen} removed (exit {p.returncode})")


def records(tmp, env, data):
    """Defects 6 and 8: library messages at the boundary; control characters in names refused."""
    plain = tmp / "plain.txt"
    plain.write_text("x")
    args = [f"data={data}", "epochs=1", "batch=8", "imgsz=64", "workers=1", "device=cpu", "plots=False"]
    r = Run(["train", *args, f"project={plain / 'runs'}"], env, timeout=300)
    check(r.refused(str(plain), "Not a directory"), f"6 project= under a file: {r}")
    project = tmp / "names"
    r = Run(["train", *args, f"project={project}", "name=a\nb"], env, timeout=300)
    check(r.refused("name=", "\\x0a") and not project.exists(), f"8 a newline in name=: {r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        env.pop("LUCID_FAULT_AT", None)
        env.pop("LUCID_AVAILABLE_MEMORY", None)
        print(f"lucid: {LUCID}; tools: {TOOLS}; root: {ROOT}", flush=True)
        data = synth_data(tmp / "data", env, n_train=8, n_val=4, imgsz=64)
        big = synth_data(tmp / "big", env, n_train=300, n_val=2, imgsz=640)
        out_targets(tmp, env)
        resume_finished(tmp, env, data)
        weights_bounds(tmp, env)
        special_inputs(tmp, env)
        weights, image = memory_checks(tmp, env, big)
        weights_and_outputs(tmp, env, weights, image)
        records(tmp, env, data)
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
