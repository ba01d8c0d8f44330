"""`lucid export` without the reference package (issue #46): every format exported and run where
`import ultralytics` fails. The venv is the package's own (build/pyvenv, which scripts/python_package.sh
gives the export packages and runtimes, and no ultralytics; LUCID_PACKAGE_PYTHON for another); the
test asserts the import fails there. yolo26n-seg, yolo11n-seg and yolov8n-seg are each trained for 2
epochs on the synthetic set (imgsz 128) and exported:

- onnx with LUCID_PYTHON pointing at nothing (lucid writes it, no Python at all), run by onnxruntime;
- openvino (from lucid's ONNX by the venv's converter), run by the OpenVINO runtime (FP32);
- torchscript made by the venv's Python, run by torch.jit in the venv and by LibTorch (`lucid
  predict model=x.torchscript` and lucid's network loader, deploy_oracle_tool); aoti the same, run
  by LibTorch;
- coreml converted, its specification checked (Core ML runs on Apple systems only); litert,
  executorch and openvino int8=True exported and run in their runtimes where the venv has their
  packages (the CI's has not); engine not here (TensorRT needs a CUDA device).

Fixed (128 x 128, batch 1, each image alone) and dynamic shapes (exported at 160, run on all images
as one batch at 128), nms=False and nms=True (and nms unset, the dense layout, for onnx) where the
format takes them (plan() says which). A format whose converter the venv lacks is skipped with a
printed line. Each file's raw outputs must equal lucid's network on the same inputs within 1e-4
(relative; not with NMS inside), and the detections decoded from them (the test's own decoding: rows
above conf, or class-aware NMS over the dense layout; retina masks) or `lucid predict` of the file
(LibTorch) must give `lucid predict` of the weights with the same head: same classes, scores within
1e-3, boxes within 1 px, mask IoU >= 0.99. The images are square at 128, so every letterbox is the
image itself.

The exporters and runtimes run in the venv only (tests/python/export_runtimes.py); this driver, run
with the project's Python, trains, compares and decodes without importing the reference either.
Time on the 2-core CPU machine: see tests/CMakeLists.txt."""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_common import (LUCID, DetectionMatch, boundary_conf, compare_layout, lucid_outputs,  # noqa: E402
                           lucid_predictions, run_name, square_images, train_small)
from oracle_common import Comparison  # noqa: E402
from package_env import PACKAGE_PYTHON, require_package  # noqa: E402

FAMILIES = {"yolo26n-seg": True, "yolo11n-seg": False, "yolov8n-seg": False}  # model -> end-to-end
IMGSZ = 128  # the training size; the images are squares of it
DYNAMIC_IMGSZ = 160  # a dynamic file's export size (its top-k stays 300 at 128: 336 anchors)
CONF = 0.001
NC, NM = 3, 32  # the synthetic set's classes; mask coefficients
RAW_TOL = 1e-4
RUNTIMES = Path(__file__).resolve().parent / "export_runtimes.py"
failures = []


def venv(*args):
    return subprocess.run([str(PACKAGE_PYTHON), str(RUNTIMES), *map(str, args)], capture_output=True, text=True, cwd="/")


def check_no_reference():
    """`import ultralytics` fails in the venv; returns which converter and runtime modules it has."""
    r = subprocess.run([str(PACKAGE_PYTHON), "-c", "import ultralytics"], capture_output=True, text=True, cwd="/")
    if r.returncode == 0 or "No module named 'ultralytics'" not in r.stderr:
        sys.exit(f"{PACKAGE_PYTHON} imports ultralytics (exit {r.returncode}): this test needs a venv without it")
    print(f"{PACKAGE_PYTHON}: import ultralytics fails ({r.stderr.strip().splitlines()[-1]})")
    r = venv("--probe")
    if r.returncode != 0:
        sys.exit(f"export_runtimes.py --probe failed:\n{r.stderr[-2000:]}")
    have = json.loads(r.stdout)
    print("the venv has: " + ", ".join(m for m, ok in have.items() if ok) +
          "; lacks: " + ", ".join(m for m, ok in have.items() if not ok))
    return have


def finish(cmp, what):
    try:
        cmp.finish(what)
    except SystemExit as e:
        failures.append(str(e))


class Case:
    """One exported file: its format, nms= (None: unset), fixed or dynamic, and the layout of its
    output0: "rows" (an end-to-end model's top-k, or NMS inside) or "dense" (the one-to-many head)."""

    def __init__(self, family, weights, fmt, nms, dynamic, path, int8=False):
        self.family, self.weights, self.fmt, self.nms, self.dynamic, self.path = family, weights, fmt, nms, dynamic, path
        self.int8 = int8  # openvino int8=True, calibrated on the synthetic set's validation images
        self.outputs = {}  # runtime -> the prefixes of its outputs, one per input
        end2end = FAMILIES[family]
        if fmt == "executorch":  # no top-k in its export: the dense outputs, NMS after (docs/deploy.md)
            self.layout = "dense"
        elif nms is True:
            self.layout = "nms"
        elif nms is None and fmt == "onnx":  # lucid's ONNX default: the reference's dense layout
            self.layout = "dense"
        else:  # the other formats' default and nms=False: the one-to-one head of an end-to-end model
            self.layout = "rows" if end2end else "dense"
        # LiteRT's dense output has its boxes divided by the input size, as the reference's
        self.normalized = fmt == "litert" and self.layout == "dense"
        self.name = (f"{family} {fmt}{' int8' if int8 else ''} {'dynamic' if dynamic else 'fixed'} "
                     f"nms={'unset' if nms is None else nms}")

    def export_args(self):
        args = [f"imgsz={DYNAMIC_IMGSZ if self.dynamic else IMGSZ}"]
        if self.dynamic:
            args.append("dynamic=True")
        if self.nms is not None:
            args.append(f"nms={self.nms}")
        if self.nms is True:
            args.append(f"conf={CONF}")  # the NMS inside keeps what lucid predict's NMS keeps at CONF
        if self.int8:
            args += ["int8=True", f"data={Path(self.weights).parents[3] / 'cache' / 'synth-v1' / 'data.yaml'}"]
        return args

    def network_nms(self):
        """deploy_oracle_tool's nms= for lucid's network in this file's layout; None with NMS inside."""
        return {"rows": "False", "dense": "None"}.get(self.layout)

    def predict_nms(self):
        """`lucid predict`'s nms= for the same head: the one-to-one head, else the NMS head."""
        return "False" if self.layout == "rows" else ""


class Family:
    """A trained model, its square images and what lucid computes on them."""

    def __init__(self, tmp, family):
        t = time.monotonic()
        self.family, self.tmp = family, tmp / family
        self.tmp.mkdir()
        self.weights, self.env, val = train_small(self.tmp, f"{family}.yaml")
        self.square = self.tmp / "square"
        images = square_images(val, self.square, IMGSZ)
        self.names = [p.name for p in images]
        rgb = [cv2.imread(str(p))[..., ::-1].transpose(2, 0, 1) for p in images]
        self.x = torch.from_numpy(np.ascontiguousarray(np.stack(rgb))).float() / 255  # (N, 3, 128, 128)
        self.outputs = {nms: lucid_outputs(self.weights, [self.x], self.tmp, nms)[0] for nms in ("None", "False")}
        self.rows_conf = boundary_conf([self.outputs["False"][0]], CONF) if FAMILIES[family] else CONF
        self.predictions = {}
        print(f"{family}: trained and run by lucid in {time.monotonic() - t:.0f} s; rows compared above conf "
              f"{self.rows_conf:.5f}")

    def conf(self, case):
        return self.rows_conf if case.layout == "rows" else CONF

    def predict(self, model, case, what):
        """`lucid predict` of model (the weights or a file) with case's head: {image: detections}."""
        key = (str(model), case.predict_nms())
        if key not in self.predictions:
            self.predictions[key] = lucid_predictions(model, self.square, IMGSZ, self.tmp, run_name("p", what), self.env,
                                                      self.conf(case), nms=case.predict_nms())
        return self.predictions[key]


def detections(pred, proto, layout, conf):
    """One image's outputs (square input) -> [(score, class, xyxy, mask)] as `lucid predict` computes
    them with retina masks: rows above conf, or class-aware NMS (IoU 0.7, at most 300) over the dense
    layout's candidates above conf; boxes clipped to the image; mask logits upsampled bilinearly to
    the image, > 0, cropped to the box; detections with an empty mask dropped."""
    pred, proto = torch.as_tensor(pred).float(), torch.as_tensor(proto).float()
    nm, mh, mw = proto.shape
    h, w = 4 * mh, 4 * mw
    if layout == "dense":
        x = pred.T
        score, cls = x[:, 4:4 + NC].max(1)
        keep = score > conf
        x, score, cls = x[keep], score[keep], cls[keep]
        order = score.argsort(descending=True, stable=True)
        x, score, cls = x[order], score[order], cls[order]
        boxes = torch.cat([x[:, :2] - x[:, 2:4] / 2, x[:, :2] + x[:, 2:4] / 2], 1)
        kept = torchvision.ops.nms(boxes + cls[:, None].float() * 7680, score, 0.7)[:300]
        det = torch.cat([boxes, score[:, None], cls[:, None].float(), x[:, 4 + NC:]], 1)[kept]
    else:
        det = pred[pred[:, 4] > conf]
    if len(det) == 0:
        return []
    boxes = det[:, :4].clone()
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, w)
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, h)
    logits = (det[:, 6:] @ proto.reshape(nm, -1)).reshape(-1, 1, mh, mw)
    masks = F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=False)[:, 0] > 0
    cols, rows = torch.arange(w).view(1, 1, w), torch.arange(h).view(1, h, 1)
    b = boxes[:, :, None, None]
    masks &= (cols >= b[:, 0]) & (cols < b[:, 2]) & (rows >= b[:, 1]) & (rows < b[:, 3])
    return [(float(d[4]), int(d[5]), bx.numpy(), m.numpy()) for d, bx, m in zip(det, boxes, masks) if m.any()]


def export(case, env):
    """`lucid export` of the case's file; False (a failure recorded) when it fails."""
    t = time.monotonic()
    r = subprocess.run([str(LUCID), "export", f"model={case.weights}", f"format={case.fmt}", *case.export_args(),
                        f"out={case.path}"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        msg = (r.stdout + r.stderr).strip().splitlines()
        failures.append(f"{case.name}: lucid export failed ({r.returncode}): {' | '.join(msg[-3:])}")
        return False
    print(f"{case.name}: exported in {time.monotonic() - t:.1f} s ({case.path.name})")
    return True


def check_raw(fam, case, pred, proto, runtime):
    """The file's raw outputs (N images) in runtime against lucid's network in the same layout, within
    1e-4; False when their shapes are not the layout's."""
    n = fam.x.shape[0]
    anchors = sum((IMGSZ // s) ** 2 for s in (8, 16, 32))
    want = (n, 4 + NC + NM, anchors) if case.layout == "dense" else (n, 300, 6 + NM)
    if tuple(pred.shape) != want or tuple(proto.shape) != (n, NM, IMGSZ // 4, IMGSZ // 4):
        failures.append(f"{case.name}, {runtime}: output shapes {tuple(pred.shape)} {tuple(proto.shape)}, expected {want} "
                        f"{(n, NM, IMGSZ // 4, IMGSZ // 4)}")
        return False
    if case.network_nms() is not None:
        cmp = Comparison(RAW_TOL)
        compare_layout(cmp, f"{case.name}, {runtime}", fam.outputs[case.network_nms()], (pred, proto),
                       case.layout == "rows", NC)
        finish(cmp, f"{case.name}: raw outputs in {runtime} vs lucid's network")
    return True


def check_detections(fam, case, pred, proto, runtime):
    """Detections decoded from the file's outputs in runtime against `lucid predict` of the weights."""
    conf = fam.conf(case)
    ours = fam.predict(fam.weights, case, f"{fam.family} weights {case.predict_nms()}")
    match = DetectionMatch(conf, score_tol=1e-3, box_tol=1.0, iou_min=0.99)
    for k, name in enumerate(fam.names):
        match.image(name, ours.get(name, []), detections(pred[k], proto[k], case.layout, conf))
    failures.extend(match.finish(f"{case.name}: {runtime} vs lucid predict, conf {conf:.5f}"))


def check_libtorch(fam, case):
    """A file LibTorch runs (torchscript, aoti): lucid's network loader on it against the weights' (raw
    outputs), and `lucid predict model=file` against `lucid predict` of the weights (detections)."""
    try:
        if case.network_nms() is not None:
            xs = [fam.x] if case.dynamic else list(fam.x.split(1))
            pred, proto = (torch.cat(parts) for parts in zip(*lucid_outputs(case.path, xs, fam.tmp, case.network_nms())))
            check_raw(fam, case, pred, proto, "LibTorch")
        ours = fam.predict(fam.weights, case, f"{fam.family} weights {case.predict_nms()}")
        theirs = fam.predict(case.path, case, case.name)
    except SystemExit as e:  # oracle_common.run: the command and its message
        failures.append(f"{case.name}: LibTorch (lucid) failed on the file: {str(e).strip()[-600:]}")
        return
    conf = fam.conf(case)
    match = DetectionMatch(conf, score_tol=1e-3, box_tol=1.0, iou_min=0.99)
    for name in fam.names:
        match.image(name, theirs.get(name, []), ours.get(name, []))
    failures.extend(match.finish(f"{case.name}: lucid predict model={case.path.name} (LibTorch) vs lucid predict, "
                                 f"conf {conf:.5f}"))


def check_coreml(case):
    """Core ML runs on Apple systems only: the package's specification (its input image and outputs)."""
    r = venv("--coreml", case.path)
    if r.returncode != 0:
        failures.append(f"{case.name}: reading the specification failed: {r.stderr[-1000:]}")
        return
    spec = json.loads(r.stdout)
    anchors = sum((IMGSZ // s) ** 2 for s in (8, 16, 32))
    want = [[1, 4 + NC + NM, anchors] if case.layout == "dense" else [1, 300, 6 + NM], [1, NM, IMGSZ // 4, IMGSZ // 4]]
    shapes = [o["shape"] for o in spec["outputs"]]
    if case.layout == "nms" and shapes[:1] == [[]]:
        shapes[0] = want[0]  # the rows after the traced NMS: a shape the converter leaves unstated
    image = spec["inputs"][0] if len(spec["inputs"]) == 1 else {}
    meta = spec["metadata"]
    print(f"{case.name}: Core ML specification: input {spec['inputs']}, outputs "
          f"{[o['shape'] for o in spec['outputs']]}; not run: Core ML runs on Apple systems only")
    if shapes != want or (image.get("width"), image.get("height"), image.get("rgb")) != (IMGSZ, IMGSZ, True):
        failures.append(f"{case.name}: Core ML input {spec['inputs']}, outputs {shapes}, expected {want}")
    if (meta.get("task"), meta.get("imgsz"), meta.get("end2end"), meta.get("names", "").count(":")) != \
            ("segment", f"[{IMGSZ}, {IMGSZ}]", str(case.layout == "rows"), NC):
        failures.append(f"{case.name}: Core ML metadata {meta}")


def check_int8(fam, case, pred, proto):
    """An INT8 IR: FakeQuantize nodes, and outputs in the FP32 file's layout (the accuracy INT8 keeps is
    measured by tests/oracle/test_export_openvino_oracle.py)."""
    fake = next(case.path.glob("*.xml")).read_text().count('type="FakeQuantize"')
    n = fam.x.shape[0]
    ok = tuple(pred.shape) == (n, 300, 6 + NM) and tuple(proto.shape) == (n, NM, IMGSZ // 4, IMGSZ // 4)
    print(f"{case.name}: {fake} FakeQuantize nodes, outputs {tuple(pred.shape)} {tuple(proto.shape)}")
    if not fake or not ok:
        failures.append(f"{case.name}: {fake} FakeQuantize nodes, outputs {tuple(pred.shape)} {tuple(proto.shape)}")


def formats_to_run(have):
    """The formats this venv can export: format -> the runtimes its files run in here ("libtorch":
    lucid itself; "coreml": the specification only)."""
    formats = {"onnx": ["onnxruntime"]}
    if not have["onnxruntime"]:
        failures.append("onnxruntime is missing from the venv: scripts/python_package.sh installs it")
        formats = {}
    wanted = [("openvino", ["openvino", "onnx"], ["openvino"]), ("torchscript", [], ["torch.jit", "libtorch"]),
              ("aoti", [], ["libtorch"]), ("coreml", ["coremltools"], ["coreml"]),
              ("litert", ["litert_torch", "ai_edge_litert"], ["litert"]), ("executorch", ["executorch"], ["executorch"])]
    for fmt, modules, runtimes in wanted:
        missing = [m for m in modules if not have[m]]
        if missing:
            print(f"skipped: format={fmt}: the venv lacks {', '.join(missing)} (requirements-export.txt)")
        else:
            formats[fmt] = runtimes
    if "openvino" in formats and not have["nncf"]:
        print("skipped: format=openvino int8=True: the venv lacks nncf (requirements-export.txt)")
    if formats.get("torchscript") and not have["torchvision"]:
        failures.append("torchvision is missing from the venv: torchscript nms=True needs it (scripts/python_package.sh)")
    print("skipped: format=engine: TensorRT builds and runs engines on a CUDA device only "
          "(tests/oracle/test_export_engine_oracle.py)")
    return formats


def plan(family, fmt):
    """The (dynamic, nms) exports of one model in one format. ONNX (about 2 s an export): every shape
    and nms= value. OpenVINO (7 s): every one for the end-to-end yolo26, and for each NMS model both
    shapes and both nms= values over two files, paired the other way round for the other model.
    TorchScript (8 s): the same but dynamic=True with nms=True, which it refuses (its NMS is traced
    for the export's batch). Core ML (20 s): one export a model, nms=True for yolo11. The formats
    with no dynamic= and nms=: their fixed shape and their one head."""
    end2end, first = FAMILIES[family], family == "yolo11n-seg"
    if fmt == "onnx":  # nms unset: the dense layout, which is also an NMS model's nms=False
        return [(d, n) for d in (False, True) for n in ([None] if end2end else []) + [False, True]]
    if fmt == "openvino":
        if end2end:
            return [(d, n) for d in (False, True) for n in (False, True)]
        return [(False, False), (True, True)] if first else [(False, True), (True, False)]
    if fmt == "torchscript":
        return [(False, False), (False, True), (True, False)] if end2end else [(False, True), (True, False)]
    if fmt == "coreml":
        return [(False, first)]
    return [(False, None)]


SUFFIX = {"onnx": ".onnx", "openvino": "_openvino_model", "torchscript": ".torchscript", "aoti": ".pt2",
          "coreml": ".mlpackage", "litert": ".tflite", "executorch": "_executorch_model"}


def run_in_runtimes(jobs, tmp):
    """The venv's runtimes on every job at once (each model loaded once)."""
    if not jobs:
        return
    t = time.monotonic()
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    r = venv(tmp / "jobs.json")
    if r.returncode != 0:
        failures.append(f"the runtimes failed: {r.stderr.strip()[-3000:]}")
    print(f"runtimes: {len(jobs)} files run in the venv in {time.monotonic() - t:.0f} s")


def export_all(families, formats, have, tmp):
    """Every family's exports (the ONNX file with no Python, the others with the venv's); the jobs
    for the venv's runtimes. Returns [(family, case)] of the files written, and the jobs."""
    t = time.monotonic()
    no_python = tmp / "no-python"  # LUCID_PYTHON pointing at nothing
    (tmp / "exports").mkdir()
    (tmp / "outputs").mkdir()
    cases, jobs = [], []
    for fam in families:
        x_fixed = []
        for k, x in enumerate(fam.x.split(1)):
            x_fixed.append(tmp / "outputs" / f"{fam.family}-x{k}.npy")
            np.save(x_fixed[-1], x.numpy())
        x_all = tmp / "outputs" / f"{fam.family}-x.npy"
        np.save(x_all, fam.x.numpy())
        for fmt, runtimes in formats.items():
            int8 = [(False, False, True)] if fmt == "openvino" and have["nncf"] and FAMILIES[fam.family] else []
            for dynamic, nms, q in [(d, n, False) for d, n in plan(fam.family, fmt)] + int8:
                path = tmp / "exports" / (f"{fam.family}-{'dynamic' if dynamic else 'fixed'}-"
                                          f"nms{'' if nms is None else nms}{'-int8' if q else ''}{SUFFIX[fmt]}")
                case = Case(fam.family, fam.weights, fmt, nms, dynamic, path, int8=q)
                python = no_python if fmt == "onnx" else PACKAGE_PYTHON
                if not export(case, dict(fam.env, LUCID_PYTHON=str(python))):
                    continue
                cases.append((fam, case))
                xs = [x_all] if case.dynamic else x_fixed
                for runtime in runtimes:
                    if runtime in ("libtorch", "coreml"):
                        continue
                    case.outputs[runtime] = [tmp / "outputs" / f"{case.path.name}-{runtime}-{k}" for k in range(len(xs))]
                    jobs.append({"runtime": runtime, "model": str(case.path), "inputs": [str(x) for x in xs],
                                 "outputs": [str(o) for o in case.outputs[runtime]]})
    print(f"exports: {len(cases)} files in {time.monotonic() - t:.0f} s")
    return cases, jobs


def check_case(fam, case, runtimes):
    for runtime in runtimes:
        if runtime == "libtorch":
            check_libtorch(fam, case)
        elif runtime == "coreml":
            check_coreml(case)
        else:
            try:
                parts = [[np.load(f"{o}.output{k}.npy") for o in case.outputs[runtime]] for k in range(2)]
            except FileNotFoundError:
                failures.append(f"{case.name}: no outputs from {runtime}")
                continue
            pred, proto = (torch.from_numpy(np.concatenate(p)) for p in parts)
            if case.normalized:
                pred[:, :4] *= IMGSZ
            if case.int8:
                check_int8(fam, case, pred, proto)
            elif check_raw(fam, case, pred, proto, runtime):
                check_detections(fam, case, pred, proto, runtime)


def main():
    require_package()
    t0 = time.monotonic()
    have = check_no_reference()
    formats = formats_to_run(have)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        families = [Family(tmp, f) for f in FAMILIES]
        cases, jobs = export_all(families, formats, have, tmp)
        run_in_runtimes(jobs, tmp)
        t = time.monotonic()
        for fam, case in cases:
            check_case(fam, case, formats[case.fmt])
        print(f"comparisons: {time.monotonic() - t:.0f} s")
    if "ultralytics" in sys.modules:
        failures.append("the test itself imported the reference package")
    print(f"total: {time.monotonic() - t0:.0f} s")
    if failures:
        sys.exit(f"{len(failures)} failure(s):\n" + "\n".join(failures[:60]))


if __name__ == "__main__":
    main()
