"""Model oracle: the reference package (ultralytics) and lucid build the same YAML; weights carried
across through safetensors and the converter script give the same outputs (training-mode head
outputs, decoded inference output, BatchNorm statistics) within 1e-4 relative, FP32 on the CPU, at
two input sizes, in both directions."""
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, SOURCE_DIR, Comparison, one_to_one, run  # noqa: E402

warnings.filterwarnings("ignore")
from ultralytics.nn.tasks import SegmentationModel  # noqa: E402

TOOL = BUILD_DIR / "tests" / "model_oracle_tool"
CONVERT = SOURCE_DIR / "scripts" / "ultralytics_weights.py"
TOL = 1e-4
INPUT_SHAPES = [(2, 3, 256, 256), (1, 3, 320, 416)]


def reference_outputs(model, inputs):
    out = {}
    for k, x in enumerate(inputs):
        model.eval()
        with torch.no_grad():
            (y, proto), preds = model(x)
            head = model.model[-1]
            out[f"{k}.eval.dense"] = head._inference(preds["one2one"] if head.end2end else preds)
        out[f"{k}.eval.y"] = y
        out[f"{k}.eval.proto"] = proto
        model.train()
        preds = model(x)
        branches = {"one2many": preds["one2many"], "one2one": preds["one2one"]} if "one2many" in preds else {"one2many": preds}
        for name, b in branches.items():
            p = f"{k}.train.{name}"
            out[p + ".boxes"], out[p + ".scores"], out[p + ".mask_coefficient"] = b["boxes"], b["scores"], b["mask_coefficient"]
            proto = b["proto"]
            if isinstance(proto, tuple):
                out[p + ".proto"], out[p + ".semantic"] = proto
            else:
                out[p + ".proto"] = proto
    for name, t in model.state_dict().items():
        if "running_" in name:
            out["final." + name] = t
    return out


def check_topk(c, name, ours, dense, ref_y):
    """End-to-end top-k rows: with scores that tie to within float rounding, the rank order among
    ties is arbitrary, so check the sorted scores, and that every row is the decode of an anchor with
    that class and score (box and coefficients equal to that anchor's)."""
    c.check(name + ".scores_sorted", ours[..., 4].sort(-1, descending=True)[0], ref_y[..., 4].sort(-1, descending=True)[0])
    nc = dense.shape[1] - 4 - 32
    worst = 0.0
    for b in range(ours.shape[0]):
        for row in ours[b]:
            cls = int(row[5])
            d = dense[b]
            err = (d[4 + cls] - row[4]).abs() + (d[:4] - row[:4, None]).abs().amax(0) / d[:4].abs().max()
            err = err + (d[4 + nc:] - row[6:, None]).abs().amax(0) / max(d[4 + nc:].abs().max().item(), 1e-12)
            worst = max(worst, err.min().item())
    c.count += 1
    c.worst = max(c.worst, worst)
    if not worst <= TOL:
        c.failures.append(f"{name}: a top-k row matches no anchor's decode (error {worst:.3g})")


def compare(ours, ref, what):
    c = Comparison(TOL)
    missing = sorted(set(ref) - set(ours))
    if missing:
        sys.exit(f"{what}: outputs missing from lucid: {missing[:5]}")
    for name in sorted(ref):
        if name.endswith(".eval.y") and ref[name].shape != ref[name.replace(".y", ".dense")].shape:
            check_topk(c, name, ours[name].double(), ref[name.replace(".y", ".dense")].double(), ref[name].double())
        else:
            c.check(name, ours[name], ref[name].detach())
    c.finish(what)


def perturb(model, seed):
    """Random BatchNorm statistics and affine terms, and random conv biases: the eval path then
    exercises BatchNorm fully and class scores are spread out, so top-k ranks are well separated."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None and m.bias.requires_grad:
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 2)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


def main():
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        g = torch.Generator().manual_seed(0)
        inputs = [torch.rand(s, generator=g) for s in INPUT_SHAPES]
        save_file({f"x{k}": x for k, x in enumerate(inputs)}, tmp / "inputs.safetensors")
        for name in ["yolo26n-seg", "yolo11n-seg"]:
            # Reference -> lucid: an Ultralytics checkpoint, converted by the interchange script.
            torch.manual_seed(0)
            ref = SegmentationModel(f"{name}.yaml", verbose=False)
            one_to_one(ref)
            perturb(ref, 1)
            torch.save({"model": ref}, tmp / "ref.pt")
            run([sys.executable, CONVERT, "to-safetensors", tmp / "ref.pt", tmp / "ref.safetensors"])
            expected = reference_outputs(ref, inputs)
            run([TOOL, f"{name}.yaml", tmp / "ref.safetensors", tmp / "inputs.safetensors", tmp / "ours.safetensors"])
            compare(load_file(tmp / "ours.safetensors"), expected, f"{name} reference weights in lucid")

            # lucid -> reference: our seeded weights converted to an Ultralytics checkpoint.
            run([TOOL, f"{name}.yaml", tmp / "lucid.safetensors", tmp / "inputs.safetensors", tmp / "ours2.safetensors",
                 "--create", "7"])
            run([sys.executable, CONVERT, "to-pt", f"{name}.yaml", tmp / "lucid.safetensors", tmp / "lucid.pt", "--fp32"])
            back = one_to_one(torch.load(tmp / "lucid.pt", weights_only=False)["model"].float())
            for p in back.parameters():
                p.requires_grad_(True)
            expected = reference_outputs(back, inputs)
            compare(load_file(tmp / "ours2.safetensors"), expected, f"{name} lucid weights in the reference")


if __name__ == "__main__":
    main()
