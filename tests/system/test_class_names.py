"""Class names taken from a weights file, as `lucid predict save_crop=True` meets them
(docs/reliability.md, "Names taken from files"), on the `lucid` binary of LUCID_BUILD_DIR:
- a name holding a NUL byte is refused at once with one line naming the file and the entry (it
  made the crop folder's free-name search loop forever on a truncated path);
- names that are relative (../../../x) or absolute (/tmp/...) paths write their crops inside the
  run folder's crops/, nothing anywhere else;
- control characters in names (ESC sequences that set the window title or colours, BEL, newline)
  reach stdout and stderr as \\xNN, never raw.
The weights are `lucid model save`'s freshly initialised yolo26n-seg with their metadata names
rewritten; conf=0 makes them detect on any image."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, failures, lucid  # noqa: E402

TIMEOUT = 60
RAW = (b"\x1b", b"\x07", b"\xc2\x9b")  # ESC, BEL and C1 CSI (U+009B) as they would reach a terminal


def with_names(src, dst, names):
    """A copy of weights file src whose metadata names are names."""
    with safe_open(str(src), "np") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta["names"] = json.dumps(names)
    save_file(tensors, str(dst), metadata=meta)
    return dst


def files_under(folder, skip):
    """Every path under folder except those under skip."""
    return sorted(str(p) for p in Path(folder).rglob("*") if skip not in p.parents and p != skip)


def predict(weights, image, project, env):
    """`lucid predict save_crop=True` with a timeout: (exit code or None if it hung, stdout, stderr as bytes)."""
    args = [str(LUCID), "predict", f"model={weights}", f"source={image}", "imgsz=64", "conf=0", "max_det=20",
            "device=cpu", "save=False", "save_crop=True", f"project={project}", "name=p"]
    try:
        r = subprocess.run(args, env=env, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or b"", e.stderr or b""
    return r.returncode, r.stdout, r.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        base = tmp / "base.safetensors"
        lucid(["model", "save", "model=yolo26n-seg.yaml", f"out={base}"], env)
        nc = 80
        image = tmp / "img.png"
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(image)

        # A NUL byte: refused at once, naming the file and the entry.
        nul = with_names(base, tmp / "nul.safetensors", [f"a\0b{c}" for c in range(nc)])
        code, out, err = predict(nul, image, tmp / "nulrun", env)
        last = err.decode(errors="replace").strip().splitlines()[-1] if err.strip() else ""
        check(code == 1 and str(nul) in last and "entry 0" in last and "\\x00" in last,
              f"a NUL byte in a class name: exit {code} ({'hung' if code is None else 'ended'}): {last[-200:]}")

        # Relative and absolute paths with terminal escapes in every class name.
        hostile = {
            "relative": [f"../../../escaped/c{c}\x1b]0;pwned\x07\x1b[31m\nnext" for c in range(nc)],
            "absolute": [f"{tmp}/abs/c{c}\x1b[2J\x9b" for c in range(nc)],
        }
        for kind, names in hostile.items():
            weights = with_names(base, tmp / f"{kind}.safetensors", names)
            project = tmp / f"runs_{kind}"
            before = files_under(tmp, project)
            code, out, err = predict(weights, image, project, env)
            after = files_under(tmp, project)
            crops = list((project / "p" / "crops").rglob("*.jpg"))
            check(code == 0 and crops,
                  f"{kind} names: exit {code}, {len(crops)} crops in the run folder: {err[-300:]!r}")
            check(after == before and not (tmp / "escaped").exists() and not (tmp / "abs").exists(),
                  f"{kind} names: nothing written outside the run folder ({sorted(set(after) - set(before))[:3]})")
            check(all(c.parent.parent == project / "p" / "crops" for c in crops),
                  f"{kind} names: each crop one folder down crops/ ({[str(c) for c in crops[:2]]})")
            raw = [repr(ch) for ch in RAW if ch in out or ch in err]
            summary = [line for line in out.decode(errors="replace").splitlines() if line.startswith("image 1/1")]
            line = summary[0] if summary else ""
            check(not raw and "\\x1b" in line,
                  f"{kind} names: control characters escaped in the output (raw: {raw}): {line!r}")
            if kind == "relative":
                check("\\x0anext" in line and b"\nnext" not in out,
                      f"relative names: the newline in a name does not break the progress line: {line!r}")
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
