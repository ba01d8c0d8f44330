"""Hostile files under a memory cap: 40 files drawn from a seed (tests/tools/hostile_files_tool.cpp):
Ultralytics .pt archives whose storage entries overlap (nested; every CRC valid; up to 600 entries
over up to 8 MiB, so a reader that reads each entry on its own allocates up to about 5 GB),
.safetensors weights whose model dict is a YAML alias bomb, and dataset YAMLs holding one. Each is
given to `lucid model info` or `lucid data check` with the address space capped (ulimit -v: 3 GiB, or
6 or 12 GiB where the build's libraries need more for an ordinary `model info`).
Each must end within 60 s with exit 1 and one error line naming the file (no signal, no library
message, no "out of memory"), at a peak resident size under 1 GiB. LUCID_FUZZ_SEED picks the files
(default 29)."""
import os
import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, LUCID, check, failures  # noqa: E402

CAPS = [3 << 30, 6 << 30, 12 << 30]  # ulimit -v: the smallest under which lucid runs ordinary work
PEAK_LIMIT = 1 << 30                 # a hostile file's process: its resident peak
TIMEOUT = 60
cap = CAPS[0]


def capped():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def run_capped(args, env):
    """(exit code, negative for a signal; stderr; peak RSS bytes) of one lucid command under the cap,
    killed after TIMEOUT seconds."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([str(LUCID), *args], env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=capped)
        timer = threading.Timer(TIMEOUT, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage: its peak resident size
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, err.read().decode(errors="replace"), usage.ru_maxrss * 1024


def main():
    tool = BUILD_DIR / "tests" / "hostile_files_tool"
    seed = os.environ.get("LUCID_FUZZ_SEED", "29")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LUCID_CACHE_DIR=str(Path(tmp) / "cache"))
        # The cap: the smallest that leaves lucid room for its ordinary work (the address space of
        # LibTorch's libraries alone is over 1 GiB, more in CUDA builds).
        global cap
        for cap in CAPS:
            code, err, peak = run_capped(["model", "info", "model=yolo26n-seg.yaml"], env)
            if code == 0:
                break
        else:
            sys.exit(f"lucid model info does not run under ulimit -v {CAPS[-1]}: {err[-500:]}")
        print(f"ulimit -v {cap >> 20} MiB; an ordinary model info peaks at {peak >> 20} MiB resident", flush=True)
        listing = subprocess.run([str(tool), str(Path(tmp) / "files"), seed, "40"], capture_output=True, text=True,
                                 check=True).stdout.split("\n")
        for line in filter(None, listing):
            kind, path, naive = line.split()
            args = ["data", "check", f"data={path}"] if kind == "dataset" else ["model", "info", f"model={path}"]
            code, err, peak = run_capped(args, env)
            lines = err.strip().splitlines()
            last = lines[-1] if lines else ""
            clean = (code == 1 and last.startswith("lucid ") and ": error: " in last and path in last and
                     not any(x in last for x in ("out of memory", "enforce fail", "bad_alloc", "std::", "vector::")))
            check(clean and peak < PEAK_LIMIT,
                  f"{kind} {Path(path).name} (a naive read allocates {float(naive) / 1e9:.1f} GB): exit {code}, "
                  f"peak {peak / 2**20:.0f} MiB: {last[-200:]}")
    if failures:
        sys.exit(f"{len(failures)} hostile files were not refused cleanly within the cap")


if __name__ == "__main__":
    main()
