"""`lucid export format=tflite` (litert-torch, the reference's LiteRT export) run by the LiteRT
interpreter (ai-edge-litert, through the reference predictor). A 2-epoch yolo26n-seg run on the
synthetic set (imgsz 128) exported at 128 x 128 (its one-to-one head) must give the detections of
`lucid predict nms=False` on square images (same classes, scores within 1e-3, boxes within 1 px, mask
IoU >= 0.99). Skipped without the optional packages litert-torch and ai-edge-litert."""
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import (TRAIN_IMGSZ as IMGSZ, LUCID, boundary_conf, letterbox, lucid_outputs,  # noqa: E402
                           require_optional, runtime_against_lucid, square_images, train_small)
from oracle_common import run  # noqa: E402

CONF = 0.001


def main():
    require_optional("litert_torch", "ai_edge_litert")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ckpt, env, val = train_small(tmp)
        out = tmp / "model.tflite"
        print(run([LUCID, "export", f"model={ckpt}", "format=tflite", f"out={out}"]).strip().splitlines()[-1])
        square = tmp / "square"
        images = square_images(val, square, IMGSZ)
        # above the one-to-one top-k boundary, whose tied scores make either side's choice arbitrary
        conf = boundary_conf([y[0] for y in lucid_outputs(ckpt, [torch.stack(letterbox(images, IMGSZ, False))], tmp)], CONF)
        failures += runtime_against_lucid(out, ckpt, square, IMGSZ, tmp, env, conf, "LiteRT vs lucid predict")
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
