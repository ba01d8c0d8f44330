"""The Python package predicts images in memory (numpy arrays, PIL images, torch tensors, lists of
them) as it predicts the same pixels from PNG files (memory_sources.py, run with the installed
package on one-epoch weights raised to confident detections)."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import confident_model  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        work = tmp / "work"
        work.mkdir()
        _, images = confident_model(tmp, env, work / "weights.safetensors")
        from PIL import Image

        for i, jpg in enumerate(images[:3]):
            Image.open(jpg).convert("RGB").save(work / f"image_{i}.png")
        (tmp / "tmpdir").mkdir()
        env.update(TMPDIR=str(tmp / "tmpdir"), LUCID_TEST_COMMON=str(Path(__file__).resolve().parents[1] / "common"))
        r = subprocess.run([str(PACKAGE_PYTHON), str(Path(__file__).parent / "memory_sources.py")], cwd=work, env=env,
                           capture_output=True, text=True)
        print(r.stdout[-6000:])
        if r.returncode != 0:
            sys.exit(f"memory_sources.py failed ({r.returncode}):\n{r.stderr[-4000:]}")


if __name__ == "__main__":
    main()
