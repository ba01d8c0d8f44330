"""Helpers shared by the oracle tests: locating the build, running our tools, comparing tensors."""
import os
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("LUCID_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", SOURCE_DIR / "build"))
SHARED_DATA = SOURCE_DIR.parent / "shared" / "data"


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def one_to_one(model):
    """Selects the one-to-one head of an end-to-end reference model for inference (the reference's
    nms=False): the model-level decode lucid's model_oracle_tool writes; 8.4.190 builds such models
    on the one-to-many head + NMS, lucid's and its default for validation and prediction. Other
    models are left as they are. Returns the model."""
    head = model.model[-1]
    if getattr(head, "one2one_cv2", None) is not None:
        head.end2end = True
    return model


class Comparison:
    """Collects relative differences, max|a-b| / max|ref|, per named tensor."""

    def __init__(self, tol):
        self.tol = tol
        self.worst = 0.0
        self.failures = []
        self.count = 0

    def check(self, name, ours, ref):
        import torch

        ours, ref = ours.double(), ref.double()
        if ours.shape != ref.shape:
            self.failures.append(f"{name}: shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
            return
        scale = max(ref.abs().max().item(), 1e-12) if ref.numel() else 1.0
        rel = (ours - ref).abs().max().item() / scale if ref.numel() else 0.0
        self.count += 1
        self.worst = max(self.worst, rel)
        if not rel <= self.tol:
            self.failures.append(f"{name}: relative difference {rel:.3g} > {self.tol:g}")

    def finish(self, what):
        print(f"{what}: {self.count} tensors compared, worst relative difference {self.worst:.3g} (tolerance {self.tol:g})")
        if self.failures:
            sys.exit("\n".join(self.failures))
