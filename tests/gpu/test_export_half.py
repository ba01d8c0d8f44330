"""Half-precision exports on the GPU, traced from lucid's own network (lucid_yolo/nn): a yolo26n-seg
trained 3 epochs on the embedded synthetic set at 128 px, its class-0 logit biases raised by 6 to
confident detections, is exported with `format=aoti half=True
device=0` and `format=torchscript half=True device=0` (the formats whose FP16 is made on a CUDA
device only), and `lucid predict` of each file on the GPU must give `lucid predict` of the weights
in FP32 with the head the files carry (nms=False): per image every detection scoring clearly above
conf 0.5 on either side paired with one of its class whose score is within 0.02 and box within 2 px
(FP16 arithmetic; the FP32 files are held to 1e-3 and 1 px by the CPU oracle tests). Skipped without a
usable CUDA device."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, train  # noqa: E402

CONF = 0.5
SCORE_TOL, BOX_TOL = 0.02, 2.0
MAX_DET = 300
TIE = 1e-3  # scores this close are one tie group: the top-k's choice among them is arbitrary
RAISE = 6.0  # class 0's logit bias raised by this: confident detections whose scores still differ


def raised(plain, out):
    """The weights with class 0's logit biases (both heads, every level) raised by RAISE: a 3-epoch
    model scores nothing above conf, and a larger raise saturates every score near 1, where FP16 ties."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(plain), "pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    for k in tensors:
        if (".cv3." in k or ".one2one_cv3." in k) and k.endswith(".2.bias"):
            tensors[k][0] += RAISE
    save_file(tensors, str(out), metadata=meta)
    return out


def confident_weights(tmp, env):
    """yolo26n-seg trained 3 epochs on the embedded synthetic set at 128 px on the GPU (its data under
    tmp/cache/synth-v1), in FP32 with class 0's logits raised: the weights of the GPU prediction tests."""
    train(["model=yolo26n-seg.yaml", "epochs=3", "batch=16", "imgsz=128", "device=0", "plots=False"], env,
          tmp / "runs", "fit")
    plain = tmp / "plain.safetensors"
    subprocess.run([str(LUCID), "export", f"model={tmp / 'runs' / 'fit' / 'weights' / 'best.safetensors'}",
                    "format=safetensors", "half=False", f"out={plain}"], env=env, check=True, capture_output=True)
    return raised(plain, tmp / "raised.safetensors")


def cuda_usable():
    try:
        import torch
        return torch.cuda.is_available() and torch.ones(1, device="cuda").sum().item() == 1
    except Exception:
        return False


def predictions(model, source, project, name, env, extra=()):
    r = subprocess.run([str(LUCID), "predict", f"model={model}", f"source={source}", "imgsz=128", f"conf={CONF}",
                        "device=0", "save=False", "save_json=True", f"project={project}", f"name={name}", *extra],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lucid predict model={model} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    out = {}
    for p in json.loads((Path(project) / name / "predictions.json").read_text()):
        out.setdefault(p["file_name"], []).append((p["category_id"], p["score"], p["bbox"]))
    return out


def compare(ours, ref, what):
    """Per image, every detection scoring clearly above conf (by SCORE_TOL; above the lowest kept one
    by as much where an image fills max_det: FP16 moves scores at the boundary either way) paired with
    one of the other side's of its class, score and box within the tolerances; a detection left
    unpaired must belong to a group of equal scores (the barely trained model scores many anchors
    alike, and which of them the one-to-one top-k keeps is arbitrary)."""
    failures, paired, tied = [], 0, 0
    for image in sorted(set(ours) | set(ref)):
        a, b = ours.get(image, []), ref.get(image, [])
        floor = CONF + SCORE_TOL
        for side in (a, b):
            if len(side) >= MAX_DET:
                floor = max(floor, min(d[1] for d in side) + SCORE_TOL)
        for mine, theirs, which in ((a, b, "the file's"), (b, a, "the weights'")):
            free = list(theirs)
            for cls, score, box in (d for d in mine if d[1] > floor):
                near = [d for d in free if d[0] == cls and abs(d[1] - score) <= SCORE_TOL and
                        max(abs(x - y) for x, y in zip(d[2], box)) <= BOX_TOL]
                if not near:
                    if sum(abs(d[1] - score) <= TIE for d in mine) > 1:
                        tied += 1  # one of a group of equal scores, of which the top-k kept an arbitrary few
                        continue
                    failures.append(f"{what} {image}: {which} class {cls} score {score:.3f} box {box} has no counterpart")
                    break
                free.remove(near[0])
                paired += which == "the file's"
    print(f"{what}: {paired} detections paired (scores within {SCORE_TOL}, boxes within {BOX_TOL} px); "
          f"{tied} unpaired of tied scores")
    if paired == 0:
        failures.append(f"{what}: no detection above conf {CONF} to compare")
    return failures


def main():
    if not cuda_usable():
        print("no usable CUDA device: skipped")
        return
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        weights = confident_weights(tmp, env)
        val = tmp / "cache" / "synth-v1" / "images" / "val"
        ref = predictions(weights, val, tmp / "runs", "eager", env, ["nms=False", "half=False"])
        for fmt, out in (("aoti", tmp / "half.pt2"), ("torchscript", tmp / "half.torchscript")):
            r = subprocess.run([str(LUCID), "export", f"model={weights}", f"format={fmt}", "half=True", "device=0",
                                "imgsz=128", f"out={out}"], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"export format={fmt} half=True device=0 failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
                continue
            print(r.stdout.strip().splitlines()[-1])
            failures += compare(predictions(out, val, tmp / "runs", fmt, env), ref, f"{fmt} FP16 vs weights FP32")
    if failures:
        sys.exit("\n".join(failures[:30]))


if __name__ == "__main__":
    main()
