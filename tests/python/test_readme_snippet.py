"""README.md's Python snippet runs as written: the indented block that starts `from lucid_yolo import
YOLO` is taken from README.md as it stands, and, as the README says, run with the package's Python
in a folder where `lucid data synth out=synth` wrote the small synthetic dataset (fresh settings:
runs go to ./runs). It must exit 0, print the mask mAP50 (a number) and a line per validation image
(its path), and leave the trained run's weights under runs/segment/train/weights."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, failures, lucid  # noqa: E402
from package_env import PACKAGE_PYTHON, SOURCE_DIR, package_workdir  # noqa: E402

START = "from lucid_yolo import YOLO"


def readme_snippet():
    """The README's indented code block that starts with START, dedented."""
    lines = (SOURCE_DIR / "README.md").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip() == START and line.startswith("    "))
    block = []
    for line in lines[first:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip() + "\n"


def main():
    snippet = readme_snippet()
    print(snippet)
    with package_workdir() as (tmp, env, work):
        env = dict(env, LUCID_CONFIG_DIR=str(tmp / "config"))
        lucid(["data", "synth", "out=synth"], env, cwd=work)
        (work / "snippet.py").write_text(snippet)
        r = subprocess.run([str(PACKAGE_PYTHON), "snippet.py"], cwd=work, env=env, capture_output=True, text=True)
        print(r.stdout[-2500:])
        check(r.returncode == 0, f"the README snippet exits 0 ({r.returncode}): {r.stderr[-2000:]}")
        out = r.stdout.splitlines()
        images = sorted((work / "synth" / "images" / "val").glob("*"))
        check(any(re.fullmatch(r"[0-9.e-]+", line.strip()) for line in out), "it prints metrics.seg.map50")
        printed = [im for im in images if any(line.startswith(str(im)) or line.startswith(os.path.relpath(im, work))
                                               for line in out)]
        check(images and len(printed) == len(images), f"a line per validation image: {len(printed)}/{len(images)}")
        check((work / "runs" / "segment" / "train" / "weights" / "best.safetensors").is_file(),
              "the run's weights under runs/segment/train/weights")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
