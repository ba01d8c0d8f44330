#!/usr/bin/env python3
"""Runs a command and samples the proportional set size (PSS) of its whole process tree twice a second:
pages shared between a trainer and its forked loader workers count once, so the peak is what the
run holds in host memory. Prints one JSON line on stderr at the end and exits with the command's status.

  peak_memory.py COMMAND [ARGS...]
"""
import json
import os
import subprocess
import sys
import threading
import time


def tree(root):
    """root and its descendants, from /proc's parent links."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    proc = subprocess.Popen(sys.argv[1:])
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], sum(pss_kib(p) for p in tree(proc.pid)))
            done.wait(0.5)

    t = threading.Thread(target=sample, daemon=True)
    start = time.perf_counter()
    t.start()
    rc = proc.wait()
    done.set()
    t.join()
    print(json.dumps({"peak_host_pss_mib": round(peak[0] / 1024), "process_s": round(time.perf_counter() - start, 3),
                      "exit": rc}), file=sys.stderr, flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
