"""The Python package predicts images in memory (numpy arrays, PIL images, torch tensors, lists of
them) as it predicts the same pixels from PNG files (memory_sources.py, run with the installed
package on one-epoch weights raised to confident detections)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import confident_model  # noqa: E402
from package_env import package_workdir, run_package_script  # noqa: E402


def main():
    with package_workdir() as (tmp, env, work):
        _, images = confident_model(tmp, env, work / "weights.safetensors")
        from PIL import Image

        for i, jpg in enumerate(images[:3]):
            Image.open(jpg).convert("RGB").save(work / f"image_{i}.png")
        (tmp / "tmpdir").mkdir()
        env["TMPDIR"] = str(tmp / "tmpdir")
        run_package_script("memory_sources.py", work, env)


if __name__ == "__main__":
    main()
