"""save_pt=True of lucid train: a tiny CPU fit on the embedded synthetic dataset (imgsz 64, 1 epoch)
keeps weights/best.pt and last.pt beside the safetensors, written by the pt writer (lucid export
format=pt: scripts/ultralytics_weights.py in the project's Python); the reference's YOLO() loads
each and predicts with it; lucid_args.yaml records save_pt: True. Without the writer's package
(LUCID_PYTHON a Python that lacks ultralytics, or no executable) the run is refused before it
starts, in one line naming save_pt and the pt extra, and no run folder is made."""
import os
import stat
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import Run, check, failures, lucid  # noqa: E402

BASE = ["epochs=1", "imgsz=64", "batch=4", "workers=2", "device=cpu", "plots=False"]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        lucid(["train", *BASE, "save_pt=True", f"project={tmp / 'runs'}", "name=t"], env)
        weights = tmp / "runs" / "t" / "weights"
        for name in ("best", "last"):
            check((weights / f"{name}.safetensors").is_file() and (weights / f"{name}.pt").is_file(),
                  f"weights/{name}.pt beside {name}.safetensors")
        check("save_pt: True" in (tmp / "runs" / "t" / "lucid_args.yaml").read_text(),
              "lucid_args.yaml records save_pt: True")

        from ultralytics import YOLO

        image = next((tmp / "cache").rglob("images/val/*.jpg"))
        for name in ("best", "last"):
            model = YOLO(str(weights / f"{name}.pt"))
            results = model.predict(str(image), imgsz=64, conf=0.0001, device="cpu", verbose=False)
            check(model.task == "segment" and len(model.names) == 3 and len(results) == 1,
                  f"the reference's YOLO() loads {name}.pt (task {model.task}, {len(model.names)} classes) "
                  "and predicts with it")

        # The writer's package missing: refused before training, nothing written.
        fake = tmp / "python-without-ultralytics"
        fake.write_text("#!/bin/sh\nexit 3\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        for python, what in ((fake, "a Python without ultralytics"), (tmp / "absent" / "python", "no Python")):
            r = Run(["train", *BASE, "save_pt=True", f"project={tmp / 'runs'}", "name=refused"],
                    dict(env, LUCID_PYTHON=str(python)))
            check(r.refused("save_pt=True", "ultralytics", "lucid-yolo[pt]") and
                  not (tmp / "runs" / "refused").exists(), f"{what}: refused at the start, nothing written: {r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
