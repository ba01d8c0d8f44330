"""lucid's PyTorch definition of its networks (python/lucid_yolo/nn), which the deployment formats
traced from a Python module are made of, against the C++ network. For yolo26n-seg, yolo11n-seg and
yolov8n-seg, each trained 2 epochs on the synthetic set at imgsz 128: the weights load name for name
(strict), and with BatchNorms folded its outputs equal lucid's network (deploy_oracle_tool, as `lucid
predict` loads the weights) on the same inputs within 1e-4: the dense one-to-many output and the
prototypes on square images and on a 128 x 160 input, and for the end-to-end model the one-to-one
top-k. The Python ONNX route (a lucid without libonnx-dev) equals lucid's ONNX writer in onnxruntime
for the end-to-end model's dense and one-to-one layouts. Its NMS layout (nms=True) keeps the rows of lucid's own ONNX file with NMS inside, run by onnxruntime."""
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from deploy_common import LUCID, TRAIN_IMGSZ as IMGSZ, compare_layout, lucid_outputs, square_images, train_small  # noqa: E402
from oracle_common import SOURCE_DIR, Comparison  # noqa: E402

sys.path.insert(0, str(SOURCE_DIR / "scripts"))
from deploy_formats.common import network_package  # noqa: E402  (lucid_yolo/nn, loaded as the exporters load it)

FAMILIES = ("yolo26n-seg.yaml", "yolo11n-seg.yaml", "yolov8n-seg.yaml")


def images(paths):
    return torch.stack([torch.from_numpy(np.ascontiguousarray(cv2.imread(str(p))[..., ::-1].transpose(2, 0, 1))).float() / 255
                        for p in paths])


def nms_against_onnx(nn, net, ckpt, x, tmp, cmp, name):
    import onnxruntime as ort

    onnx = tmp / f"{name}-nms.onnx"
    subprocess.run([str(LUCID), "export", f"model={ckpt}", "format=onnx", "nms=True", "conf=0.001", "iou=0.7",
                    f"batch={x.shape[0]}", f"imgsz={IMGSZ}", f"out={onnx}"], check=True, capture_output=True)
    ref = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"]).run(None, {"images": x.numpy()})
    with torch.no_grad():
        ours = nn.DeployedNetwork(net, "nms", conf=0.001, iou=0.7)(x)
    ref = [torch.from_numpy(r) for r in ref]
    # Rows at nearly equal scores may be kept in either order (or one suppress the other) on the two
    # sides; rows scoring above half the best are compared as sets: same count, each paired with one
    # of the same class, box within 1e-3 px and score within 1e-5.
    floor = float(ref[0][..., 4].max()) / 2
    compared = 0
    for b in range(x.shape[0]):
        mine, theirs = ours[0][b][ours[0][b][:, 4] > floor], ref[0][b][ref[0][b][:, 4] > floor]
        if len(mine) != len(theirs):
            cmp.failures.append(f"{name} nms image {b}: {len(mine)} rows above {floor:.4g} vs {len(theirs)} in lucid's ONNX")
            continue
        for row in mine:
            d = (theirs - row).abs()
            close = (d[:, 5] == 0) & (d[:, :4].amax(1) <= 1e-3) & (d[:, 4] <= 1e-5)
            if not close.any():
                cmp.failures.append(f"{name} nms image {b}: row {row[:6].tolist()} has no counterpart in lucid's ONNX")
        compared += len(mine)
    print(f"{name}: NMS inside, {compared} rows above {floor:.4g} compared over {x.shape[0]} images")
    if compared == 0:
        cmp.failures.append(f"{name}: no detections to compare the NMS layout on")
    cmp.check(f"{name} nms output1", ours[1], ref[1])

def python_onnx_against_lucid(ckpt, x, tmp, cmp, name, nc):
    """scripts/deploy_export.py's ONNX route (lucid built without libonnx-dev: torch.onnx of this
    network) against lucid's own ONNX writer, both run by onnxruntime: the dense and the one-to-one
    layouts, with the metadata the reference reads."""
    import onnx
    import onnxruntime as ort

    for layout, nms, flag in (("dense", [], []), ("one_to_one", ["nms=False"], ["--one-to-one"])):
        native, python = tmp / f"{name}-{layout}.onnx", tmp / f"{name}-{layout}-python.onnx"
        common = [f"--imgsz={IMGSZ}", f"--batch={x.shape[0]}"]
        subprocess.run([str(LUCID), "export", f"model={ckpt}", "format=onnx", *nms, f"batch={x.shape[0]}",
                        f"imgsz={IMGSZ}", f"out={native}"], check=True, capture_output=True)
        subprocess.run([sys.executable, str(SOURCE_DIR / "scripts" / "deploy_export.py"), "onnx", str(ckpt), str(python),
                        *common, *flag], check=True, capture_output=True)
        outs = [ort.InferenceSession(str(f), providers=["CPUExecutionProvider"]).run(None, {"images": x.numpy()})
                for f in (python, native)]
        ours, ref = [(torch.from_numpy(o[0]), torch.from_numpy(o[1])) for o in outs]
        compare_layout(cmp, f"{name} python ONNX {layout}", ours, ref, layout == "one_to_one", nc)
        meta = {p.key: p.value for p in onnx.load(str(python)).metadata_props}
        if meta.get("task") != "segment" or meta.get("imgsz") != f"[{IMGSZ}, {IMGSZ}]" or \
                meta.get("end2end") != str(layout == "one_to_one"):
            cmp.failures.append(f"{name} python ONNX {layout}: metadata {meta}")


def main():
    nn = network_package()
    cmp = Comparison(1e-4)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for model in FAMILIES:
            name = Path(model).stem
            ckpt, _, val = train_small(tmp / name, model)
            net, names, imgsz = nn.load_network(ckpt)  # strict: every name of the C++ state dict
            print(f"{name}: {sum(p.numel() for p in net.parameters())} parameters, classes {names}, imgsz {imgsz}")
            square = images(square_images(val, tmp / name / "square", IMGSZ)[:4])
            wide = torch.rand(2, 3, IMGSZ, IMGSZ + 32, generator=torch.Generator().manual_seed(0))
            layouts = [("dense", "None")] + ([("one_to_one", "False")] if net.end2end else [])
            for layout, nms in layouts:
                deployed = nn.DeployedNetwork(net, layout)
                refs = lucid_outputs(ckpt, [square, wide], tmp, nms)
                for x, ref, what in zip((square, wide), refs, ("square", "128x160")):
                    with torch.no_grad():
                        ours = deployed(x)
                    compare_layout(cmp, f"{name} {layout} {what}", ours, ref, layout == "one_to_one", len(names))
            nms_against_onnx(nn, net, ckpt, square, tmp, cmp, name)
            if net.end2end:
                python_onnx_against_lucid(ckpt, square, tmp, cmp, name, len(names))
    cmp.finish("lucid_yolo.nn vs lucid's network")


if __name__ == "__main__":
    main()
