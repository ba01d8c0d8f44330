"""The Python package runs exported files as models: YOLO("best.torchscript") and YOLO("best.onnx")
(onnxruntime) read the file's names and size and predict what the weights predict (exported_models.py, run with the installed package on
one-epoch weights raised to confident detections)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import confident_model, lucid  # noqa: E402
from package_env import package_workdir, run_package_script  # noqa: E402


def square_dataset(synth, out, size):
    """The synthetic set's validation images stretched to size x size (PNG) with their labels, which
    are normalised and so stay right: every letterbox of them, a fixed file's square one and the
    weights' rectangular batches, is the same input. Returns its data.yaml."""
    from PIL import Image

    for split in ("images", "labels"):
        (out / split / "val").mkdir(parents=True, exist_ok=True)
    for jpg in sorted((synth / "images" / "val").glob("*.jpg")):
        Image.open(jpg).convert("RGB").resize((size, size)).save(out / "images" / "val" / f"{jpg.stem}.png")
        label = synth / "labels" / "val" / f"{jpg.stem}.txt"
        (out / "labels" / "val" / label.name).write_text(label.read_text())
    names = (synth / "data.yaml").read_text().split("names:", 1)[1]
    (out / "data.yaml").write_text(f"path: {out}\ntrain: images/val\nval: images/val\nnames:{names}")
    return out / "data.yaml"


def main():
    with package_workdir() as (tmp, env, work):
        weights, images = confident_model(tmp, env, work / "weights.safetensors", classes=[0])
        lucid(["export", f"model={weights}", "format=torchscript", "imgsz=64", f"out={work / 'model.torchscript'}"], env)
        for name, options in (("model.onnx", ["nms=False"]), ("dynamic.onnx", ["dynamic=True"]),
                              ("dynamic_e2e.onnx", ["dynamic=True", "nms=False"]),
                              ("nms.onnx", ["nms=True", "conf=0.25", "iou=0.7", "batch=2"])):
            lucid(["export", f"model={weights}", "format=onnx", "imgsz=64", *options, f"out={work / name}"], env)
        from PIL import Image

        for i, jpg in enumerate(images[:3]):
            Image.open(jpg).convert("RGB").resize((64, 64)).save(work / f"square_{i}.png")
        env["LUCID_TEST_DATA"] = str(square_dataset(images[0].parents[2], work / "square_data", 64))
        run_package_script("exported_models.py", work, env)


if __name__ == "__main__":
    main()
