"""`lucid export format=openvino` (lucid's ONNX converted by OpenVINO; int8=True: NNCF's calibration
of it) run by the OpenVINO runtime on the CPU. A 2-epoch yolo26n-seg run on the synthetic set (imgsz
128) is exported at 128 x 128: the reference predictor running the IR in OpenVINO must give the
detections of `lucid predict` on square images (same classes, scores within 1e-3, boxes within 1 px,
mask IoU >= 0.99). int8=True quantizes with NNCF, calibrated on the set's validation images as lucid
letterboxes them: the IR must hold INT8 weights (FakeQuantize nodes), and the accuracy it keeps is
measured by the reference's validator on the same set, FP32 IR against INT8 IR (box and mask
mAP50-95, printed); INT8 must keep at least 80% of the FP32 mask mAP50.
OpenVINO's CPU plugin runs an FP32 IR in BF16 on processors with native BF16 (AMX, AVX512_BF16)
unless asked otherwise (boxes 0.1 px and mask IoUs 0.97 off lucid's FP32 there); the comparison
asks it for f32 (INFERENCE_PRECISION_HINT), the precision lucid predicts in.
Skipped without the optional packages openvino and nncf."""
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (TRAIN_IMGSZ as IMGSZ, expect_error, export, export_test, runtime_against_lucid,  # noqa: E402
                           square_and_conf)

CONF = 0.001


@contextmanager
def fp32_inference():
    """Every OpenVINO compile_model in this process with INFERENCE_PRECISION_HINT f32 (the reference's
    backend passes only its performance hint)."""
    import openvino as ov

    compile_model = ov.Core.compile_model

    def f32(self, model, device_name=None, config=None, **kw):
        return compile_model(self, model, device_name, {**(config or {}), "INFERENCE_PRECISION_HINT": "f32"}, **kw)

    ov.Core.compile_model = f32
    try:
        yield
    finally:
        ov.Core.compile_model = compile_model


def accuracy(ir, data):
    from ultralytics import YOLO

    m = YOLO(str(ir), task="segment").val(data=str(data), imgsz=IMGSZ, batch=1, device="cpu", plots=False, verbose=False)
    return {"box mAP50-95": m.box.map, "box mAP50": m.box.map50, "mask mAP50-95": m.seg.map, "mask mAP50": m.seg.map50}


def check_export(tmp, ckpt, env, val, failures):
    data = tmp / "cache" / "synth-v1" / "data.yaml"
    ir = tmp / "model_openvino_model"
    export(ckpt, "openvino", ir)
    square, _, conf = square_and_conf(ckpt, val, tmp, CONF)
    with fp32_inference():
        failures += runtime_against_lucid(ir, ckpt, square, IMGSZ, tmp, env, conf, "OpenVINO FP32 vs lucid predict")

    int8 = tmp / "model_int8_openvino_model"
    export(ckpt, "openvino", int8, "int8=True", f"data={data}")
    xml = next(int8.glob("*.xml")).read_text()
    if xml.count('type="FakeQuantize"') == 0:
        failures.append("int8=True: the IR has no FakeQuantize nodes")
    fp32, q8 = accuracy(ir, data), accuracy(int8, data)
    for k in fp32:
        print(f"{k}: FP32 {fp32[k]:.4f}, INT8 {q8[k]:.4f} ({q8[k] / fp32[k] * 100 if fp32[k] else float('nan'):.1f}% kept)")
    if not fp32["mask mAP50"] > 0:
        failures.append("FP32 mask mAP50 is 0: nothing to measure INT8 against")
    elif q8["mask mAP50"] < 0.8 * fp32["mask mAP50"]:
        failures.append(f"INT8 keeps {q8['mask mAP50'] / fp32['mask mAP50']:.1%} of the FP32 mask mAP50 (< 80%)")

    expect_error([f"model={ckpt}", "format=openvino", "int8=True"], "needs data=", env, failures)
    expect_error([f"model={ckpt}", "format=openvino", "int8=True", f"data={tmp / 'none.yaml'}"], "none.yaml", env, failures)
    expect_error([f"model={ckpt}", "format=onnx", "int8=True"], "option int8=", env, failures)


def main():
    export_test(check_export, optional=("openvino", "nncf"))


if __name__ == "__main__":
    main()
