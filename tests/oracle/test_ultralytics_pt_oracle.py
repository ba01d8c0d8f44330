"""The .pt oracle: checkpoints written by the reference package as its trainer writes them (FP16
`ema` with `model` None, from BaseTrainer.save_model), as its strip_optimizer finalises them (FP16
`model`, `ema` None) and as plain FP32 `torch.save` files, for yolo26n-seg, yolo11n-seg and
yolov8n-seg with a non-default nc and names. lucid's native reader must give the state dict of the
entry the reference loads byte for byte, under the same names, with the same yaml, names and
train_args; and lucid's model built from that yaml and loaded from the .pt must give the reference's
outputs (load_checkpoint's model, FP32) within 1e-4. `lucid model info` accepts the .pt as weights."""
import copy
import json
import re
import sys
import tempfile
import types
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from oracle_common import BUILD_DIR, one_to_one, run  # noqa: E402
from test_model_oracle import INPUT_SHAPES, compare, perturb, reference_outputs  # noqa: E402

warnings.filterwarnings("ignore")
from ultralytics.cfg import get_cfg  # noqa: E402
from ultralytics.engine.trainer import BaseTrainer  # noqa: E402
from ultralytics.nn.tasks import SegmentationModel, load_checkpoint  # noqa: E402
from ultralytics.utils.torch_utils import ModelEMA, strip_optimizer  # noqa: E402

TOOL = BUILD_DIR / "tests" / "ultralytics_pt_oracle_tool"
MODEL_TOOL = BUILD_DIR / "tests" / "model_oracle_tool"
LUCID = BUILD_DIR / "lucid"
NC = 3


def trainer_checkpoint(name, path):
    """A checkpoint written by the reference trainer's own save_model, after one optimizer step."""
    torch.manual_seed(0)
    model = SegmentationModel(f"{name}.yaml", nc=NC, verbose=False)
    model.names = {i: f"class{i}" for i in range(NC)}
    perturb(model, 1)
    args = get_cfg(overrides={"model": f"{name}.yaml", "data": "synthetic.yaml", "epochs": 3, "imgsz": 256})
    model.args = args
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sum(p.float().pow(2).sum() for p in model.parameters()).backward()
    opt.step()
    ema = ModelEMA(model)
    ema.update(model)
    trainer = types.SimpleNamespace(
        ema=ema, model=model, optimizer=opt, scaler=torch.amp.GradScaler("cpu", enabled=False), args=args,
        metrics={"metrics/mAP50(M)": 0.25}, fitness=0.2, best_fitness=0.2, epoch=1, save_period=-1,
        stopper=types.SimpleNamespace(best_fitness=0.2, best_epoch=1),
        read_results_csv=lambda: {"epoch": [1.0]}, wdir=path.parent, last=path, best=path.with_name("unused_best.pt"))
    BaseTrainer.save_model(trainer)
    return model


def check_read(pt, entry, tmp):
    """lucid's reader against torch.load of the same file."""
    ckpt = torch.load(pt, map_location="cpu", weights_only=False)
    module = ckpt.get("ema") or ckpt.get("model")
    run([TOOL, pt, tmp / "state.safetensors", tmp / "meta.json"])
    ours = load_file(tmp / "state.safetensors")
    meta = json.loads((tmp / "meta.json").read_text())
    ref = module.state_dict()
    failures = []
    if meta["entry"] != entry:
        failures.append(f"entry {meta['entry']} vs {entry}")
    if set(ours) != set(ref):
        failures.append(f"names differ: missing {sorted(set(ref) - set(ours))[:5]}, extra {sorted(set(ours) - set(ref))[:5]}")
    for k, v in ref.items():
        o = ours.get(k)
        if o is None:
            continue
        if o.dtype != v.dtype or o.shape != v.shape:
            failures.append(f"{k}: {o.dtype} {tuple(o.shape)} vs reference {v.dtype} {tuple(v.shape)}")
        elif not torch.equal(o.reshape(-1).view(torch.uint8), v.contiguous().reshape(-1).view(torch.uint8)):
            failures.append(f"{k}: bytes differ")
    if meta["yaml"] != json.loads(json.dumps(module.yaml)):
        failures.append("yaml differs")
    if meta["names"] != [module.names[i] for i in range(len(module.names))]:
        failures.append(f"names {meta['names']} vs {module.names}")
    if meta["train_args"] != json.loads(json.dumps(ckpt.get("train_args"))):
        failures.append("train_args differ")
    if failures:
        sys.exit(f"{pt.name}:\n" + "\n".join(failures))
    dtypes = sorted({str(v.dtype) for v in ref.values()})
    print(f"{pt.name}: '{entry}' read, {len(ref)} tensors byte-identical ({', '.join(dtypes)}), yaml, names, train_args equal")


def main():
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        g = torch.Generator().manual_seed(0)
        inputs = [torch.rand(s, generator=g) for s in INPUT_SHAPES]
        save_file({f"x{k}": x for k, x in enumerate(inputs)}, tmp / "inputs.safetensors")
        for name in ["yolo26n-seg", "yolo11n-seg", "yolov8n-seg"]:
            trained = tmp / f"{name}-last.pt"
            trainer_checkpoint(name, trained)
            final = tmp / f"{name}-final.pt"
            strip_optimizer(trained, final)
            fp32 = tmp / f"{name}-fp32.pt"
            ckpt = torch.load(final, map_location="cpu", weights_only=False)
            ckpt["model"] = copy.deepcopy(ckpt["model"]).float()
            torch.save(ckpt, fp32)
            check_read(trained, "ema", tmp)
            check_read(final, "model", tmp)
            check_read(fp32, "model", tmp)

            # The forward: lucid's model from the checkpoint's yaml and weights vs the reference's load.
            yaml_path = tmp / f"{name}.yaml"  # named as the reference names the scale
            run([TOOL, trained, tmp / "state.safetensors", tmp / "meta.json", yaml_path])
            for pt in (trained, fp32):
                ref = one_to_one(load_checkpoint(pt)[0])
                for p in ref.parameters():
                    p.requires_grad_(True)
                expected = reference_outputs(ref, inputs)
                run([MODEL_TOOL, yaml_path, pt, tmp / "inputs.safetensors", tmp / "ours.safetensors"])
                compare(load_file(tmp / "ours.safetensors"), expected, f"{pt.name} read by lucid")

            # The stock YAML (nc 80) with the .pt: nc comes from the weights.
            out = run([LUCID, "model", "info", f"model={name}.yaml", f"weights={trained}"])
            found = re.search(r"([\d,]+) parameters", out)
            count = sum(p.numel() for p in ref.parameters())
            if not found or int(found.group(1).replace(",", "")) != count:
                sys.exit(f"lucid model info model={name}.yaml weights=.pt: expected {count} parameters:\n{out}")
            print(f"lucid model info {name}.yaml weights=.pt: {count} parameters, nc {NC} from the weights")


if __name__ == "__main__":
    main()
