"""`lucid export format=litert` (litert-torch, the reference's LiteRT export) run by the LiteRT
interpreter (ai-edge-litert, through the reference predictor). A 2-epoch yolo26n-seg run on the
synthetic set (imgsz 128) exported at 128 x 128 (its one-to-one head) must give the detections of
`lucid predict nms=False` on square images (same classes, scores within 1e-3, boxes within 1 px, mask
IoU >= 0.99). Skipped without the optional packages litert-torch and ai-edge-litert."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import TRAIN_IMGSZ as IMGSZ, export, export_test, runtime_against_lucid, square_and_conf  # noqa: E402

CONF = 0.001


def check_export(tmp, ckpt, env, val, failures):
    out = tmp / "model.tflite"
    export(ckpt, "litert", out)
    square, _, conf = square_and_conf(ckpt, val, tmp, CONF)
    failures += runtime_against_lucid(out, ckpt, square, IMGSZ, tmp, env, conf, "LiteRT vs lucid predict")


def main():
    export_test(check_export, optional=("litert_torch", "ai_edge_litert"))


if __name__ == "__main__":
    main()
