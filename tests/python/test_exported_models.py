"""The Python package runs exported files as models: YOLO("best.torchscript") reads the file's names
and size and predicts what the weights predict (exported_models.py, run with the installed package on
one-epoch weights raised to confident detections)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import confident_model, lucid  # noqa: E402
from package_env import package_workdir, run_package_script  # noqa: E402


def main():
    with package_workdir() as (tmp, env, work):
        weights, images = confident_model(tmp, env, work / "weights.safetensors", classes=[0])
        lucid(["export", f"model={weights}", "format=torchscript", "imgsz=64", f"out={work / 'model.torchscript'}"], env)
        from PIL import Image

        for i, jpg in enumerate(images[:3]):
            Image.open(jpg).convert("RGB").resize((64, 64)).save(work / f"square_{i}.png")
        run_package_script("exported_models.py", work, env)


if __name__ == "__main__":
    main()
