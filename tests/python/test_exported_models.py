"""The Python package runs exported files as models: YOLO("best.torchscript") reads the file's names
and size and predicts what the weights predict (exported_models.py, run with the installed package on
one-epoch weights raised to confident detections)."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import confident_model, lucid  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        work = tmp / "work"
        work.mkdir()
        weights, images = confident_model(tmp, env, work / "weights.safetensors", classes=[0])
        lucid(["export", f"model={weights}", "format=torchscript", "imgsz=64", f"out={work / 'model.torchscript'}"], env)
        from PIL import Image

        for i, jpg in enumerate(images[:3]):
            Image.open(jpg).convert("RGB").resize((64, 64)).save(work / f"square_{i}.png")
        env["LUCID_TEST_COMMON"] = str(Path(__file__).resolve().parents[1] / "common")
        r = subprocess.run([str(PACKAGE_PYTHON), str(Path(__file__).parent / "exported_models.py")], cwd=work, env=env,
                           capture_output=True, text=True)
        print(r.stdout[-6000:])
        if r.returncode != 0:
            sys.exit(f"exported_models.py failed ({r.returncode}):\n{r.stderr[-4000:]}")


if __name__ == "__main__":
    main()
