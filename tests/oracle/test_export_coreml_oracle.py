"""`lucid export format=coreml` (coremltools' conversion of the traced model, the reference's CoreML
export). Core ML runs only on Apple systems, so on Linux the package is converted and its
specification checked, not run: a 2-epoch yolo26n-seg run on the synthetic set (imgsz 128) exported
at 128 x 128 must give an ML Program whose input is the RGB image `image` (128 x 128, pixels scaled
by 1/255 inside) and whose two FP32 outputs are the one-to-one rows (1, 300, 6 + nm) and the
prototypes (1, nm, 32, 32), with the class names, task, imgsz and end2end in its metadata; half=True
stores FP16 weights (about half the bytes) behind the same FP32 interface. Skipped without the optional package coremltools."""
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import expect_error, export, export_test  # noqa: E402

FLOAT32 = 65568  # Core ML ArrayFeatureType data type


def check_spec(path, dtype, failures):
    import coremltools as ct

    spec = ct.utils.load_spec(str(path))
    inputs = list(spec.description.input)
    image = inputs[0].type.imageType if inputs else None
    if len(inputs) != 1 or inputs[0].name != "image" or image.width != 128 or image.height != 128 or \
            image.colorSpace != ct.proto.FeatureTypes_pb2.ImageFeatureType.RGB:
        failures.append(f"{path.name}: input {inputs}")
    shapes = [list(o.type.multiArrayType.shape) for o in spec.description.output]
    types = [o.type.multiArrayType.dataType for o in spec.description.output]
    print(f"{path.name}: spec version {spec.specificationVersion}, outputs {shapes}, data types {types}")
    if shapes != [[1, 300, 38], [1, 32, 32, 32]] or types != [dtype, dtype]:
        failures.append(f"{path.name}: outputs {shapes} of types {types}")
    meta = dict(spec.description.metadata.userDefined)
    if len(ast.literal_eval(meta.get("names", "{}"))) != 3 or meta.get("task") != "segment" or \
            meta.get("imgsz") != "[128, 128]" or meta.get("end2end") != "True":
        failures.append(f"{path.name}: metadata {meta}")


def check_export(tmp, ckpt, env, val, failures):
    out, half = tmp / "model.mlpackage", tmp / "half.mlpackage"
    export(ckpt, "coreml", out, "imgsz=128")
    check_spec(out, FLOAT32, failures)
    export(ckpt, "coreml", half, "imgsz=128", "half=True")
    check_spec(half, FLOAT32, failures)  # FP16 inside, FP32 at the interface
    size = lambda p: sum(f.stat().st_size for f in (p / "Data").rglob("*.bin"))
    print(f"weights: {size(out) / 1e6:.1f} MB FP32, {size(half) / 1e6:.1f} MB FP16")
    if not size(half) < 0.6 * size(out):
        failures.append(f"half=True: weights {size(half)} bytes vs {size(out)} in FP32")
    expect_error([f"model={ckpt}", "format=coreml", "dynamic=True"], "option dynamic=", env, failures)


def main():
    export_test(check_export, optional=("coremltools",))


if __name__ == "__main__":
    main()
