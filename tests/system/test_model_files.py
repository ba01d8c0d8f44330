"""The four kinds of model file end to end (CPU, a tiny run on the synthetic set at imgsz 64):
- a lucid training checkpoint, lucid weights from `lucid export format=safetensors` (FP16 and FP32)
  and an Ultralytics .pt from `lucid export format=pt` each work as model= in train (a new run from
  their weights: `Transferred M/M`), val and predict, and as weights= of `lucid model info`;
  `pretrained=W` beside a YAML transfers too; FP32 exports and the .pt validate to the checkpoint's
  own numbers; the exports carry the class names and imgsz;
- best.safetensors keeps only the EMA weights and is smaller than last;
- wrong kinds of file (an image, a text file, a truncated checkpoint) fail with one line naming the
  file, before any dataset work; resume= refuses options it would ignore; a resume from best and an
  unsupported export format are clear errors."""
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, failures, lucid  # noqa: E402

TRAIN = ["epochs=1", "imgsz=64", "batch=8", "workers=2", "device=cpu", "plots=False", "close_mosaic=0"]


def all_row(text):
    rows = [l.split() for l in text.splitlines() if l.split()[:1] == ["all"] and len(l.split()) == 11]
    return rows[-1] if rows else None


def transferred(text):
    m = re.search(r"Transferred (\d+)/(\d+) items from pretrained weights", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def refused(r, name, fragment=""):
    err = r.stderr.strip()
    return (r.returncode == 1 and len(err.splitlines()) == 1 and name in err and fragment in err
            and "json.exception" not in err and "invalid YAML" not in err and "escape character" not in err)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        common = [f"project={project}"]
        lucid(["train", *TRAIN, *common, "name=base"], env)
        weights = project / "base" / "weights"
        last, best = weights / "last.safetensors", weights / "best.safetensors"
        check(best.stat().st_size * 2 < last.stat().st_size,
              f"best ({best.stat().st_size} bytes) keeps the EMA only, last ({last.stat().st_size}) everything")
        image = sorted((tmp / "cache" / "synth-v1" / "images" / "val").iterdir())[0]
        val = ["val", "device=cpu", "plots=False", *common]
        ref = all_row(lucid([*val, f"model={best}", "name=v"], env).stdout)

        # Exports: FP16 and FP32 weights, an Ultralytics .pt.
        w16, w32, pt = tmp / "w16.safetensors", tmp / "w32.safetensors", tmp / "w.pt"
        lucid(["export", f"model={best}", f"out={w16}"], env)
        lucid(["export", f"model={best}", "half=False", f"out={w32}"], env)
        lucid(["export", f"model={best}", "format=pt", "half=False", f"out={pt}"], env)
        check(w16.stat().st_size * 3 < w32.stat().st_size * 2, "the default export is FP16, half the FP32 size")
        r = lucid(["export", f"model={best}", "format=pt", f"out={tmp / 'x.pt'}"], dict(env, LUCID_PYTHON=str(tmp / "nope")),
                  expect=None)
        check(refused(r, "LUCID_PYTHON") and not (tmp / "x.pt").exists(), f"format=pt without Python: {r.stderr.strip()}")
        r = lucid(["export", f"model={best}", f"out={best}"], env, expect=None)
        check(refused(r, "would overwrite"), f"export onto its own input: {r.stderr.strip()}")
        r = lucid(["export", f"model={best}", "format=paddle"], env, expect=None)
        check(refused(r, "format=paddle", "supported formats are safetensors, pt, onnx, aoti, torchscript"),
              f"an unsupported format lists the supported: {r.stderr.strip()}")
        for f in (w16, w32, pt):
            v = lucid([*val, f"model={f}", f"name=v{f.stem}{f.suffix[1:]}"], env).stdout
            if f != w16:
                check(all_row(v) == ref, f"lucid val {f.name}: {all_row(v)} vs the checkpoint's {ref}")
            else:
                check(all_row(v) is not None and "imgsz 64" in v, f"lucid val {f.name} at the file's imgsz: {all_row(v)}")
            p = lucid(["predict", f"model={f}", f"source={image}", "device=cpu", "conf=0.001", "save_txt=True", *common,
                       f"name=p{f.stem}{f.suffix[1:]}"], env)
            labels = project / f"p{f.stem}{f.suffix[1:]}" / "labels" / f"{image.stem}.txt"
            check(labels.exists() and labels.read_text().strip(), f"lucid predict {f.name}: {labels.name}")
            info = lucid(["model", "info", f"weights={f}"], env).stdout
            check("YOLO26n-seg summary" in info, f"lucid model info weights={f.name}")
        # New runs from every kind of weights file, and pretrained= beside a YAML.
        for name, args in (("from_ckpt", [f"model={best}"]), ("from_last", [f"model={last}"]),
                           ("from_w16", [f"model={w16}"]), ("from_pt", [f"model={pt}"]),
                           ("pretrained", ["model=yolo26n-seg.yaml", f"pretrained={w32}"])):
            out = lucid(["train", *TRAIN, *common, f"name={name}", *args], env).stdout
            n = transferred(out)
            check(n is not None and n[0] == n[1] and "resuming" not in out, f"train {' '.join(args)}: Transferred {n}")
        out = lucid(["train", *TRAIN, *common, "name=scratch", f"model={pt}", "pretrained=False"], env).stdout
        check(transferred(out) is None, "pretrained=False: the architecture only")

        # Wrong kinds of file, before any dataset work (the data= below does not exist).
        (tmp / "notes.txt").write_text("nc: 3\nnot a model\n")
        (tmp / "cut.safetensors").write_bytes(last.read_bytes()[:5000])
        (tmp / "cut.pt").write_bytes(pt.read_bytes()[:5000])
        (tmp / "w.jpg").write_bytes(image.read_bytes())
        for bad in (tmp / "w.jpg", tmp / "notes.txt", tmp / "cut.safetensors", tmp / "cut.pt"):
            r = lucid(["train", *TRAIN, *common, f"model={bad}", f"data={tmp / 'none.yaml'}"], env, expect=None)
            check(refused(r, str(bad)), f"train model={bad.name}: {r.stderr.strip()}")
            r = lucid([*val, f"model={bad}"], env, expect=None)
            check(refused(r, str(bad)), f"val model={bad.name}: {r.stderr.strip()}")
            r = lucid(["predict", f"model={bad}", f"source={image}", "device=cpu", *common], env, expect=None)
            check(refused(r, str(bad)), f"predict model={bad.name}: {r.stderr.strip()}")
        r = lucid([*val, f"model={tmp / 'w.jpg'}"], env, expect=None)
        check("not a model YAML, .pt, or .safetensors file" in r.stderr, f"an image as model=: {r.stderr.strip()}")
        r = lucid(["train", *TRAIN, *common, f"model={w32}", f"pretrained={w16}"], env, expect=None)
        check(refused(r, "pretrained="), f"pretrained= beside weights: {r.stderr.strip()}")

        # resume= refuses what it would ignore; best holds no state to resume from.
        r = lucid(["train", f"resume={last}", "lr0=0.02"], env, expect=None)
        check(refused(r, "option lr0=0.02", f"model={last}"), f"resume with lr0=: {r.stderr.strip()}")
        r = lucid(["train", f"resume={last}", f"data={tmp / 'd.yaml'}"], env, expect=None)
        check(refused(r, "option data="), f"resume with data=: {r.stderr.strip()}")
        r = lucid(["train", f"resume={best}"], env, expect=None)
        check(refused(r, str(best), "weights/last.safetensors"), f"resume from best: {r.stderr.strip()}")
    if failures:
        sys.exit("\n".join(failures))
    print("model files: all checks passed")


if __name__ == "__main__":
    main()
