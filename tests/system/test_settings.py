"""`lucid settings` and what the settings do. Shown without a file, the defaults and nothing written;
`key=value` updates are checked (a misspelt key gets the nearest one, a bad value is named) and
written as JSON; a broken file is an error naming it until `lucid settings reset`. runs_dir is the
default project of train (runs_dir/segment/train), val and predict; tensorboard=True in the file turns the
event files on for a fit that does not say tensorboard=, and tensorboard=False on the command line
wins over it; datasets_dir is where a dataset YAML's relative `path:` is found last, as the
reference's DATASETS_DIR."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, failures, lucid, synth_data  # noqa: E402

# The Python package's logging integrations' switches, the reference's defaults (docs/python.md).
INTEGRATIONS = {"clearml": True, "comet": True, "dvc": True, "mlflow": True, "neptune": True, "wandb": False}


def settings_commands(env, config):
    file = config / "settings.json"
    r = lucid(["settings"], env)
    check("not written yet" in r.stdout and '"runs_dir": "runs"' in r.stdout and '"tensorboard": false' in r.stdout,
          f"without a file: the defaults ({r.stdout.strip()})")
    check(not file.exists(), "showing the settings writes nothing")
    r = lucid(["settings", "tensorbord=True"], env, expect=1)
    check("did you mean tensorboard" in r.stderr, f"a misspelt key gets the nearest ({r.stderr.strip()})")
    r = lucid(["settings", "tensorboard=maybe"], env, expect=1)
    check("tensorboard=maybe" in r.stderr, f"a bad value is named ({r.stderr.strip()})")
    r = lucid(["settings", "runs_dir="], env, expect=1)
    check("runs_dir=" in r.stderr, f"an empty directory is refused ({r.stderr.strip()})")
    check(not file.exists(), "refused updates write nothing")
    r = lucid(["settings", "tensorboard=True", "runs_dir=elsewhere"], env)
    check("Updated 'tensorboard=True'" in r.stdout, "the update is reported")
    check(json.loads(file.read_text()) == {"runs_dir": "elsewhere", "datasets_dir": "datasets", "weights_dir": "weights",
                                           "tensorboard": True, **INTEGRATIONS},
          f"the file holds the update ({file.read_text()})")
    file.write_text('{"tensorboard": "yes"}')
    r = lucid(["settings"], env, expect=1)
    check(str(file) in r.stderr and "'tensorboard' must be true or false" in r.stderr,
          f"a wrong type names the file and key ({r.stderr.strip()})")
    file.write_text("{not json")
    r = lucid(["train", "epochs=1"], env, expect=1)
    check(str(file) in r.stderr and "settings reset" in r.stderr, f"a broken file stops train naming it ({r.stderr.strip()})")
    lucid(["settings", "reset"], env)
    check(json.loads(file.read_text()) == {"runs_dir": "runs", "datasets_dir": "datasets", "weights_dir": "weights",
                                           "tensorboard": False, **INTEGRATIONS},
          "reset writes the defaults")


def settings_in_runs(env, tmp):
    runs = tmp / "myruns"
    lucid(["settings", f"runs_dir={runs}", "tensorboard=True"], env)
    work = tmp / "work"
    work.mkdir()
    common = ["epochs=1", "imgsz=64", "workers=2", "plots=False"]
    lucid(["train", *common], env, cwd=work)
    run = runs / "segment" / "train"
    check((run / "weights" / "last.safetensors").exists(), f"train's default project is runs_dir/segment ({run})")
    check(len(list(run.glob("events.out.tfevents.*"))) == 1, "tensorboard=True in the settings writes events")
    check("tensorboard: True" in (run / "lucid_args.yaml").read_text(), "lucid_args.yaml records tensorboard: True")
    lucid(["train", *common, "tensorboard=False"], env, cwd=work)
    check(not list((runs / "segment" / "train2").glob("events.out.tfevents.*")),
          "tensorboard=False on the command line wins over the settings")
    lucid(["val", f"model={run / 'weights' / 'best.safetensors'}", "imgsz=64", "plots=False"], env, cwd=work)
    check((runs / "segment" / "val").is_dir(), "val's default project is runs_dir/segment")
    data = Path(next(line.split(": ", 1)[1] for line in (run / "args.yaml").read_text().splitlines()
                     if line.startswith("data: ")))
    image = sorted((data.parent / "images" / "val").iterdir())[0]
    lucid(["predict", f"model={run / 'weights' / 'best.safetensors'}", f"source={image}"], env, cwd=work)
    check((runs / "segment" / "predict").is_dir(), "predict's default project is runs_dir/segment")
    check(not (work / "runs").exists(), "nothing under the working folder's runs/")


def datasets_dir(env, tmp):
    root = tmp / "datasets_root"
    synth_data(root / "shapes", env, 4, 2, 64)
    yaml = tmp / "yamls" / "shapes.yaml"
    yaml.parent.mkdir()
    names = (root / "shapes" / "data.yaml").read_text().split("names:", 1)[1]
    yaml.write_text("path: shapes\ntrain: images/train\nval: images/val\nnames:" + names)
    r = lucid(["data", "check", f"data={yaml}"], env, expect=1, cwd=tmp)
    check("path not found" in r.stderr, f"path: not beside the YAML nor in the working folder ({r.stderr.strip()})")
    lucid(["settings", f"datasets_dir={root}"], env)
    r = lucid(["data", "check", f"data={yaml}"], env, cwd=tmp)
    check(str(root / "shapes") in r.stdout, f"path: found under datasets_dir ({r.stdout.strip()[:300]})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = tmp / "config"
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"), LUCID_CONFIG_DIR=str(config))
        settings_commands(env, config)
        settings_in_runs(env, tmp)
        shutil.rmtree(config)
        datasets_dir(env, tmp)
    if failures:
        sys.exit(f"{len(failures)} failed")


if __name__ == "__main__":
    main()
