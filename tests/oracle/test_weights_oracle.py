"""Weights both ways with the reference package, on a model the reference trained on lucid's synthetic
set (reference_model.py, trained once per build):
1. `lucid val model=best.pt` prints the same "all" row (three significant digits, as printed) as the
   reference's own `YOLO(best.pt).val()` on the same data, image size and batch.
2. Fine-tuning: `lucid train model=best.pt epochs=1` transfers every tensor (`Transferred M/M`) and
   its first validation keeps mask mAP50 near the pretrained value, while a fresh start from the
   YAML stays near zero. With a dataset of another class count the class branches keep their
   initialisation: the Transferred line gives the reference's own count (intersect_dicts).
3. Round trip: the fine-tuned lucid checkpoint -> `lucid export format=pt` -> the reference's
   `YOLO(pt).val()` gives `lucid val`'s "all" row and lucid's class names; the default FP16 export
   predicts and exports (TorchScript) in the reference.
"""
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from reference_model import LUCID, SETTINGS, reference_weights, synthetic_dataset  # noqa: E402

warnings.filterwarnings("ignore")
os.environ["YOLO_OFFLINE"] = "1"
IMGSZ, BATCH = SETTINGS["imgsz"], 16
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def lucid(*args, env=None):
    r = subprocess.run([str(LUCID), *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"lucid {' '.join(map(str, args))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def rows(text):
    """The validator table's rows after its last header: {class: [images, instances, 8 metrics]}."""
    lines = text.splitlines()
    start = max(i for i, l in enumerate(lines) if l.split()[:3] == ["Class", "Images", "Instances"])
    out = {}
    for l in lines[start + 1:]:
        t = l.split()
        if len(t) != 11:
            break
        out[t[0]] = t[1:]
    return out


def reference_rows(weights, data, project):
    """The reference's `YOLO(weights).val()` table as it prints it (%11.3g), and its mask mAP50."""
    from ultralytics import YOLO

    model = YOLO(str(weights))
    # The default of both (8.4.190): the one-to-many head and NMS, also for yolo26.
    m = model.val(data=str(data), imgsz=IMGSZ, batch=BATCH, device="cpu", plots=False, verbose=True, workers=0,
                  project=str(project), name="val")
    fmt = lambda v: "%.3g" % v  # noqa: E731
    table = {"all": [fmt(v) for v in m.mean_results()]}
    for i, c in enumerate(m.ap_class_index):
        table[model.names[int(c)]] = [fmt(v) for v in m.class_result(i)]
    return table, m.seg.map50, model.names


def transferred(out):
    m = re.search(r"Transferred (\d+)/(\d+) items from pretrained weights", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def first_mask_map50(run_dir):
    lines = (Path(run_dir) / "results.csv").read_text().splitlines()
    header = lines[0].split(",")
    return float(lines[1].split(",")[header.index("metrics/mAP50(M)")])


def dataset_with_names(tmp, synth, names):
    """The synthetic images and labels under other class names (more names: a larger nc)."""
    y = Path(tmp) / f"data{len(names)}.yaml"
    y.write_text(f"path: {synth.parent}\ntrain: images/train\nval: images/val\nnames:\n"
                 + "".join(f"  {i}: {n}\n" for i, n in enumerate(names)))
    return y


def main():
    import torch
    from ultralytics.nn.tasks import SegmentationModel
    from ultralytics.utils.torch_utils import intersect_dicts

    weights = reference_weights()
    synth = synthetic_dataset()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LUCID_CACHE_DIR=str(Path(tmp) / "cache"))
        project = Path(tmp) / "runs"
        common = ["device=cpu", "workers=2", "plots=False", f"project={project}"]

        # 1. lucid val of the reference's weights against the reference's own validation.
        ref_table, ref_mask50, _ = reference_rows(weights, synth, project)
        ours = rows(lucid("val", f"model={weights}", f"data={synth}", f"imgsz={IMGSZ}", f"batch={BATCH}", "name=val",
                          *common, env=env))
        check(ours.get("all", [None] * 2)[2:] == ref_table["all"],
              f"lucid val of the reference's best.pt: all row {ours.get('all')} vs the reference's {ref_table['all']}")
        print(f"pretrained mask mAP50 {ref_mask50:.4f}")
        check(ref_mask50 > 0.05, f"the reference-trained model segments (mask mAP50 {ref_mask50:.4f} > 0.05)")

        # 2. Fine-tuning from the .pt (same classes under lucid's own names), against a fresh start.
        renamed = dataset_with_names(tmp, synth, ["oval", "box", "spiky"])
        train = ["epochs=1", f"imgsz={IMGSZ}", "batch=8", f"data={renamed}"] + common
        out = lucid("train", f"model={weights}", "name=finetune", *train, env=env)
        n = transferred(out)
        check(n is not None and n[0] == n[1], f"fine-tuning transfers every tensor: {n}")
        tuned = first_mask_map50(project / "finetune")
        out = lucid("train", "model=yolo26n-seg.yaml", "name=fresh", *train, env=env)
        check(transferred(out) is None, "a fresh start from the YAML transfers nothing")
        fresh = first_mask_map50(project / "fresh")
        print(f"first validation mask mAP50: fine-tuned {tuned:.4f}, fresh start {fresh:.4f}, pretrained {ref_mask50:.4f}")
        check(tuned >= 0.6 * ref_mask50, f"fine-tuning keeps mask mAP50 near the pretrained ({tuned:.4f} vs {ref_mask50:.4f})")
        check(fresh < 0.2 * ref_mask50, f"a fresh start stays near zero ({fresh:.4f})")

        # Another class count: the class branches keep their initialisation, as the reference's load.
        wider = dataset_with_names(tmp, synth, ["c0", "c1", "c2", "c3", "c4"])
        out = lucid("train", f"model={weights}", "name=wider", *[a for a in train if not a.startswith("data=")],
                    f"data={wider}", env=env)
        ckpt = torch.load(weights, map_location="cpu", weights_only=False)
        source = ckpt["ema"] or ckpt["model"]
        target = SegmentationModel(source.yaml, nc=5, verbose=False)
        expected = (len(intersect_dicts(source.float().state_dict(), target.state_dict())), len(target.model.state_dict()))
        check(transferred(out) == expected and expected[0] < expected[1],
              f"nc 3 -> 5: lucid {transferred(out)} vs the reference's Transferred {expected}")

        # 3. Round trip: a lucid checkpoint to the reference and back in numbers and names.
        best = project / "finetune" / "weights" / "best.safetensors"
        ours = rows(lucid("val", f"model={best}", f"data={renamed}", f"imgsz={IMGSZ}", f"batch={BATCH}", "name=val2",
                          *common, env=env))
        pt32 = Path(tmp) / "lucid32.pt"
        lucid("export", f"model={best}", "format=pt", "half=False", f"out={pt32}", env=env)
        table, _, names = reference_rows(pt32, renamed, project)
        check(list(names.values()) == ["oval", "box", "spiky"], f"the exported .pt keeps lucid's class names: {names}")
        check(ours.get("all", [None] * 2)[2:] == table["all"],
              f"reference val of the exported .pt: all row {table['all']} vs lucid val {ours.get('all')}")
        for name in ("oval", "box", "spiky"):
            if name in table:
                check(ours.get(name, [None] * 2)[2:] == table[name], f"class {name}: {table[name]} vs {ours.get(name)}")
        pt16 = Path(tmp) / "lucid16.pt"
        lucid("export", f"model={best}", "format=pt", f"out={pt16}", env=env)
        from ultralytics import YOLO

        model = YOLO(str(pt16))
        image = sorted((synth.parent / "images" / "val").iterdir())[0]
        res = model.predict(str(image), imgsz=IMGSZ, conf=0.001, device="cpu", verbose=False)[0]
        check(res.masks is not None and len(res.boxes) > 0 and res.names[0] == "oval",
              f"the FP16 export predicts in the reference ({len(res.boxes)} detections, names {res.names})")
        exported = model.export(format="torchscript", imgsz=IMGSZ, device="cpu")
        check(Path(exported).is_file(), f"the reference exports it to TorchScript: {exported}")
    if failures:
        sys.exit("\n".join(failures))
    print("weights oracle: all checks passed")


if __name__ == "__main__":
    main()
