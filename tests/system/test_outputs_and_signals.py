"""The third hardening round's outputs, signals and children (docs/reliability.md, "Settings, outputs,
signals and children"), each as a user meets it at the command line, on the `lucid` binary of
LUCID_BUILD_DIR (default build/): out=/dev/stdout with stdout redirected into a log keeps the log;
SIGHUP and SIGQUIT during a video predict leave no temporary, and a later predict removes a dead
one's; an export stopped by a signal leaves no temporary and no child, and a hanging exporter
(a fake LUCID_PYTHON that sleeps: no real export runs) is stopped at LUCID_EXPORT_TIMEOUT; two
predicts never write into one folder at once; a settings.json that is a fifo, a link to a device
node copy or a folder makes train, val and predict fail at once naming it, and `lucid settings
reset` replaces it; the prepared-image cache on a full disk is an error naming the file, on a 1 MiB
tmpfs where one can be mounted (root) and always through the LUCID_FAULT_AT no-space hook. Device
node copies and the tmpfs need root; without it those checks are skipped and said to be."""
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, LUCID, Run, check, failures, synth_data  # noqa: E402

TOOLS = Path(os.environ.get("LUCID_TOOLS_DIR", BUILD_DIR / "tests"))
ROOT = os.geteuid() == 0
CAP = 6 << 30  # ulimit -v for the runs that once read a device without end (room for the CUDA libraries)


def signalled_child():
    """Set-up of a lucid to be signalled: the ending signals at their default (a shell's background
    job ignores SIGINT, which lucid then keeps ignoring) and no core file for SIGQUIT."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(args, env, timeout=60, cap=None, stdout=subprocess.DEVNULL, cwd=None):
    """One lucid command: (exit code, last stderr line, timed out)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap))) if cap else None
    p = subprocess.Popen([str(LUCID), *map(str, args)], env=env, stdout=stdout, stderr=subprocess.PIPE,
                         preexec_fn=limit, cwd=cwd)
    try:
        _, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        timed_out = True
    lines = err.decode(errors="replace").strip().splitlines()
    return p.returncode, lines[-1] if lines else "", timed_out


def running(pid):
    """Whether pid is a live process (a zombie awaiting its reaper has ended)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2] != "Z"


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def temporaries(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*.tmp.*"))


def wait_for(predicate, seconds=120):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def out_to_stdout(tmp, env):
    """10a: out=/dev/stdout (a link to /proc/self/fd/1) with stdout redirected into a log."""
    log = tmp / "run.log"
    log.write_text("earlier lines of the log\n")
    for out in ("/dev/stdout", tmp / "to_stdout"):
        if out != "/dev/stdout":
            os.symlink("/proc/self/fd/1", out)
        with open(log, "a") as stdout:
            code, last, _ = run(["model", "save", "model=yolo26n-seg.yaml", f"out={out}"], env, stdout=stdout)
        text = log.read_bytes()
        check(code == 1 and "/proc" in last and text.startswith(b"earlier lines of the log\n") and len(text) < 4096,
              f"10a out={out} with stdout redirected into a log: the log kept ({len(text)} bytes; exit {code}: {last})")


def video_predict(weights, video, folder, env, name="p", exist_ok=False):
    args = [str(LUCID), "predict", f"model={weights}", f"source={video}", "device=cpu", "imgsz=64",
            f"project={folder}", f"name={name}"] + (["exist_ok=True"] if exist_ok else [])
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=signalled_child)


def predict_signals(tmp, env, weights, video, image):
    """10b: HUP and QUIT during a video predict; 10e: two predicts into one folder; a dead predict's
    temporary removed by the next."""
    for sig in (signal.SIGHUP, signal.SIGQUIT):
        folder = tmp / f"vid_{sig.name}"
        p = video_predict(weights, video, folder, env)
        wait_for(lambda: temporaries(folder) or p.poll() is not None)
        seen = temporaries(folder)
        p.send_signal(sig)
        p.wait()
        check(bool(seen) and not temporaries(folder) and p.returncode == -sig,
              f"10b predict stopped by {sig.name} while writing a video: temporaries {seen} removed "
              f"(left {temporaries(folder)}, exit {p.returncode})")
    folder = tmp / "shared"
    first = video_predict(weights, video, folder, env, name="same", exist_ok=True)
    wait_for(lambda: temporaries(folder) or first.poll() is not None)
    start = time.monotonic()
    code, last, _ = run(["predict", f"model={weights}", f"source={image}", "device=cpu", "imgsz=64",
                         f"project={folder}", "name=same", "exist_ok=True"], env)
    took = time.monotonic() - start
    first.send_signal(signal.SIGTERM)
    first.wait()
    check(code == 1 and str(folder / "same") in last and "another lucid predict" in last and took < 30,
          f"10e a second predict into a folder in use fails at once ({took:.1f} s, exit {code}: {last})")
    stale = folder / "same" / f"clip.avi.tmp.{dead_pid()}"
    stale.write_bytes(b"half a video")
    code, last, _ = run(["predict", f"model={weights}", f"source={image}", "device=cpu", "imgsz=64",
                         f"project={folder}", "name=same", "exist_ok=True"], env)
    check(code == 0 and not stale.exists(), f"10b the next predict removes a dead predict's temporary (exit {code}: "
          f"{last}; left {temporaries(folder)})")


FAKE_PYTHON = """#!/bin/sh
# A stand-in for the project's Python: records its pid and its child's, sleeps, then writes the
# output ($4: argv is script, format, weights, out) as a late exporter would.
sleep 30 &
echo $$ $! > "$FAKE_PIDS"
wait
echo late > "$4"
"""


def export_children(tmp, env, weights):
    """10c: export stopped by SIGINT, SIGTERM or SIGKILL; 10d: a hanging exporter times out (a format
    still made by the Python exporter: torchscript)."""
    fake = tmp / "fake_python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    folder = tmp / "export"
    folder.mkdir()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        pids = folder / f"pids_{sig.name}"
        out = folder / f"m_{sig.name}.torchscript"
        e = dict(env, LUCID_PYTHON=str(fake), FAKE_PIDS=str(pids))
        p = subprocess.Popen([str(LUCID), "export", f"model={weights}", "format=torchscript", f"out={out}"], env=e,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=signalled_child)
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2 or p.poll() is not None, 60)
        children = [int(x) for x in pids.read_text().split()] if pids.exists() else []
        p.send_signal(sig)
        p.wait()
        ended = wait_for(lambda: not any(running(c) for c in children[:1 if sig == signal.SIGKILL else 2]), 5)
        time.sleep(0.5)
        left = sorted(x.name for x in folder.iterdir() if "export-tmp" in x.name)
        if sig == signal.SIGKILL:  # no handler runs: the child dies with lucid (its temporary cannot be removed)
            check(bool(children) and ended and not out.exists(),
                  f"10c export killed by SIGKILL: its child {children[:1]} ended with it, no late output")
            continue
        check(bool(children) and ended and not out.exists() and not left and p.returncode == -sig,
              f"10c export stopped by {sig.name}: child and grandchild {children} ended, no temporary ({left}), "
              f"no late output (exit {p.returncode})")
    for x in folder.glob("*export-tmp*"):
        x.unlink()
    pids = folder / "pids_timeout"
    e = dict(env, LUCID_PYTHON=str(fake), FAKE_PIDS=str(pids), LUCID_EXPORT_TIMEOUT="1")
    start = time.monotonic()
    code, last, timed_out = run(["export", f"model={weights}", "format=torchscript", f"out={folder / 'hang.torchscript'}"], e,
                                timeout=20)
    took = time.monotonic() - start
    children = [int(x) for x in pids.read_text().split()] if pids.exists() else []
    check(code == 1 and not timed_out and "did not finish within 1 s" in last and "LUCID_EXPORT_TIMEOUT" in last and
          took < 10 and children and not any(running(c) for c in children) and
          not list(folder.glob("*export-tmp*")),
          f"10d a hanging LUCID_PYTHON is stopped at LUCID_EXPORT_TIMEOUT=1 ({took:.1f} s, exit {code}: {last})")


def settings_kinds(tmp, env, data, weights, image):
    """7: settings.json as a fifo, a link to a device node copy, a folder."""
    config = tmp / "config"
    config.mkdir()
    file = config / "settings.json"
    e = dict(env, LUCID_CONFIG_DIR=str(config))
    # Without project= the runs folder comes from the settings: each command fails at once naming
    # the file. With project= val and predict need no setting: they end without reading it.
    commands = {
        "train": (["train", f"data={data}", "epochs=1", "imgsz=64", "device=cpu"], True),
        "predict": (["predict", f"model={weights}", f"source={image}", "imgsz=64", "device=cpu"], True),
        "val with project=": (["val", f"model={weights}", f"data={data}", "imgsz=64", "device=cpu",
                               f"project={tmp / 'sruns'}"], False),
        "predict with project=": (["predict", f"model={weights}", f"source={image}", "imgsz=64", "device=cpu",
                                   f"project={tmp / 'sruns'}"], False),
    }
    kinds = [("fifo", lambda: os.mkfifo(file), "fifo")]
    if ROOT:
        zero = config / "zero"
        kinds.append(("a link to a copy of /dev/zero",
                      lambda: (os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5)), os.symlink(zero, file)),
                      "character device"))
    else:
        print("skip 7 settings.json as a link to a device node copy (needs root for mknod)")
    kinds.append(("an empty folder", lambda: file.mkdir(), "folder"))
    listener = socket.socket(socket.AF_UNIX)
    kinds.append(("a socket", lambda: listener.bind(str(file)), "socket"))
    work = tmp / "settings_cwd"
    work.mkdir()
    for kind, make, word in kinds:
        make()
        for name, (args, named) in commands.items():
            start = time.monotonic()
            r = Run(args, e, cap=CAP, timeout=30, cwd=work)
            took = time.monotonic() - start
            ok = r.refused(str(file), word, "settings reset") if named else r.code in (0, 1) and str(file) not in r.last
            check(ok and took < 20 and r.peak < (1 << 30),
                  f"7 settings.json as {kind}: {name} {'fails at once naming it' if named else 'ends without it'} "
                  f"({took:.1f} s, peak {r.peak >> 20} MiB, {r})")
        check(not any(work.iterdir()), f"7 settings.json as {kind}: nothing written without a runs folder")
        code, _, _ = run(["settings", "reset"], e, timeout=30)
        kept_device = word != "character device" or stat.S_ISCHR(os.lstat(config / "zero").st_mode)
        check(code == 0 and stat.S_ISREG(os.lstat(file).st_mode) and kept_device,
              f"7 lucid settings reset replaces settings.json as {kind} with a regular file (exit {code})")
        code, last, _ = run(["settings"], e)
        check(code == 0, f"7 after the reset the settings read back ({last})")
        file.unlink()
        if ROOT:
            (config / "zero").unlink(missing_ok=True)


def disk_full(tmp, env, data):
    """2: the prepared-image cache on a full disk (rc 135, SIGBUS, and its temporary kept, before)."""
    e = dict(env)
    cache = tmp / "fault_cache"
    e["LUCID_FAULT_AT"] = "*.bin:no-space:1"
    code, last, _ = run(["data", "prepare", f"data={data}", "imgsz=320", f"cache_dir={cache}"], e)
    check(code == 1 and "no space left on device writing " + str(cache) in last and "bytes needed" in last and
          not temporaries(cache), f"2 data prepare on a full disk (fault injection): exit {code}: {last}")
    code, last, _ = run(["train", f"data={data}", "epochs=1", "imgsz=64", "device=cpu", "cache=disk", "workers=1",
                         f"project={tmp / 'fruns'}"], dict(e, LUCID_CACHE_DIR=str(tmp / "fault_cache2")), timeout=120)
    check(code == 1 and "no space left on device writing" in last and not temporaries(tmp / "fault_cache2"),
          f"2 train cache=disk on a full disk (fault injection): exit {code}: {last}")
    stale = cache / f"0123456789abcdef-320.bin.tmp.{dead_pid()}"
    stale.write_bytes(b"\0" * 4096)
    code, last, _ = run(["data", "prepare", f"data={data}", "imgsz=320", f"cache_dir={cache}"], env)
    check(code == 0 and not stale.exists(), f"2 the next prepare removes a dead prepare's temporary ({last})")
    small = tmp / "small"
    small.mkdir()
    if not ROOT or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)],
                                  capture_output=True).returncode != 0:
        print("skip 2 data prepare into a full 1 MiB tmpfs (cannot mount one here)")
        return
    try:
        code, last, _ = run(["data", "prepare", f"data={data}", "imgsz=320", f"cache_dir={small / 'prepared'}"], env)
        check(code == 1 and "no space left on device writing " + str(small / "prepared") in last and
              not temporaries(small), f"2 data prepare into a full 1 MiB tmpfs: exit {code}: {last}")
    finally:
        subprocess.run(["umount", "-l", str(small)])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), LUCID_CONFIG_DIR=str(tmp / "no_config"))
        for k in ("LUCID_FAULT_AT", "LUCID_EXPORT_TIMEOUT", "LUCID_PYTHON"):
            env.pop(k, None)
        print(f"lucid: {LUCID}; tools: {TOOLS}; root: {ROOT}", flush=True)
        data = synth_data(tmp / "data", env, n_train=8, n_val=2, imgsz=320)
        image = next((tmp / "data" / "images" / "val").iterdir())
        weights = tmp / "w.safetensors"
        subprocess.run([str(LUCID), "model", "save", "model=yolo26n-seg.yaml", f"out={weights}"], env=env, check=True,
                       capture_output=True)
        video = tmp / "clip.avi"
        subprocess.run([str(TOOLS / "video_tool"), "write", str(video), "320", "240", "400"], check=True,
                       capture_output=True)
        out_to_stdout(tmp, env)
        predict_signals(tmp, env, weights, video, image)
        export_children(tmp, env, weights)
        settings_kinds(tmp, env, data, weights, image)
        disk_full(tmp, env, data)
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
