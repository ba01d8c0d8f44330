"""The reference's command forms and keys end to end (CPU, a tiny synthetic set):

- bare boolean flags: `lucid train resume model=RUN/weights/last.safetensors epochs=2` continues that
  checkpoint (the reference's `yolo train resume model=.../last.pt`), `val` alone is val=True, a key
  that is not a flag without `=` is refused naming it, resume=True with a model that is no lucid
  checkpoint is refused;
- `lucid train model=RUN/weights/best.safetensors` without data= trains on the dataset those weights
  were trained on and says so; from a model YAML it says it trains on the synthetic dataset;
- train save=False writes weights only in the final epoch; profile=True and compile=True are refused
  with their reason; optimizer=Adam, NAdam and RMSprop train;
- predict save=False makes no folder and prints no "Results saved to"; verbose=False prints no
  per-image line; show=True and augment=True warn and predict; visualize=True is refused;
- val rect=True is accepted, classes= warns, save_txt=True is refused with its reason.
"""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, checkpoint_state, failures, lucid, results_without_time, synth_data  # noqa: E402

BASE = ["imgsz=64", "batch=4", "workers=2", "device=cpu", "plots=False"]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "LUCID_CACHE_DIR": str(tmp / "cache")}
        data = synth_data(tmp / "synth", env, 8, 4, 64)
        runs = tmp / "runs"
        lucid(["train", *BASE, f"data={data}", "epochs=1", f"project={runs}", "name=r"], env)
        last = runs / "r" / "weights" / "last.safetensors"

        # Bare flags.
        r = lucid(["train", "resume", f"model={last}", "epochs=2"], env)
        check("resuming" in r.stdout and len(results_without_time(runs / "r")) == 3,
              "train resume model=RUN/weights/last.safetensors epochs=2 continues that run to 2 epochs")
        r = lucid(["train", *BASE, f"data={data}", "epochs=1", "val", f"project={runs}", "name=v"], env)
        check("val: True" in (runs / "v" / "args.yaml").read_text(), "a bare val is val=True")
        r = lucid(["train", *BASE, "epochs", f"project={runs}"], env, expect=None)
        check(r.returncode != 0 and "'epochs' is a valid option but is missing '='" in r.stderr,
              f"a bare epochs is refused naming it: {r.stderr.strip()[-200:]}")
        r = lucid(["train", "resume", "model=yolo26n-seg.yaml"], env, expect=None)
        check(r.returncode != 0 and "resume continues a lucid training checkpoint" in r.stderr,
              "resume with a model YAML is refused")

        # Without data=: the weights' own dataset.
        best = runs / "r" / "weights" / "best.safetensors"
        r = lucid(["train", *BASE, f"model={best}", "epochs=1", f"project={runs}", "name=w"], env)
        check(f"training on {data}" in r.stdout, "train model=best.safetensors without data= names the weights' dataset")
        check(f"data: {data}" in (runs / "w" / "args.yaml").read_text(), "and trains on it")

        # Train keys.
        r = lucid(["train", *BASE, f"data={data}", "epochs=2", "save=False", "save_period=1", f"project={runs}",
                   "name=ns"], env)
        weights = sorted(p.name for p in (runs / "ns" / "weights").iterdir())
        check("epoch1.safetensors" not in weights and "epoch2.safetensors" in weights and "last.safetensors" in weights
              and checkpoint_state(runs / "ns" / "weights" / "last.safetensors")["epoch"] == 2,
              f"save=False: weights only in the final epoch ({weights})")
        for key, why in (("profile", "ONNX and TensorRT"), ("compile", "torch.compile")):
            r = lucid(["train", *BASE, f"data={data}", f"{key}=True", f"project={runs}"], env, expect=None)
            check(r.returncode != 0 and f"option {key}=True" in r.stderr and why in r.stderr, f"{key}=True is refused with why")
        for name in ("Adam", "NAdam", "RMSprop"):
            r = lucid(["train", *BASE, f"data={data}", "epochs=1", f"optimizer={name}", "val=False", f"project={runs}",
                       f"name={name}"], env)
            check(f"optimizer: {name}(" in r.stdout, f"optimizer={name} trains")

        # Predict keys.
        image = next((Path(data).parent / "images" / "val").iterdir())
        r = lucid(["predict", f"model={best}", f"source={image}", "save=False", f"project={tmp / 'p'}", "name=x"], env)
        check("Results saved to" not in r.stdout and not (tmp / "p").exists(), "predict save=False: no folder, no line")
        r = lucid(["predict", f"model={best}", f"source={image}", "verbose=False", "save=False", "show=True", "augment=True",
                   f"project={tmp / 'p'}"], env)
        check("image 1/1" not in r.stdout and "Speed:" not in r.stdout, "predict verbose=False: no per-image line")
        check("show=True" in r.stderr and "augment=True" in r.stderr, "show=True and augment=True warn")
        r = lucid(["predict", f"model={best}", f"source={image}", "visualize=True", f"project={tmp / 'p'}"], env, expect=None)
        check(r.returncode != 0 and "visualize=True" in r.stderr, "visualize=True is refused")

        # Val keys.
        r = lucid(["val", f"model={best}", "rect=True", "classes=0", "plots=False", f"project={tmp / 'v'}"], env)
        check("classes=0" in r.stderr and "ignores classes=" in r.stderr, "val classes= warns")
        r = lucid(["val", f"model={best}", "save_txt=True", f"project={tmp / 'v'}"], env, expect=None)
        check(r.returncode != 0 and "lucid predict save_txt=True" in r.stderr, "val save_txt=True is refused with why")
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
