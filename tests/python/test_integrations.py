"""The logging integrations of a training run from the Python package (lucid_yolo/integrations),
each on a tiny fit (lucid data synth, imgsz 64, 2 epochs on the CPU):
- MLflow with its file store (MLFLOW_TRACKING_URI=file:..., MLFLOW_EXPERIMENT_NAME, MLFLOW_RUN): the
  params are the run's args.yaml, the metrics the reference's keys (parentheses dropped) at steps 0
  and 1, the artifacts the weights folder, results.csv, args.yaml and the plots, the run FINISHED; the
  reference package's MLflow run of the same fit is tests/oracle/test_integrations_oracle.py;
- Weights & Biases offline (WANDB_MODE=offline): the offline run's files under save_dir/wandb: its
  config is the args, its history has the reference's keys at epochs 1 and 2, the best weights are an
  artifact;
- Comet, ClearML, Neptune and DVC against stand-in modules (tests/python/integration_standins, put on
  sys.path first) that record each call: the calls, keys and steps as the reference's integrations
  make them;
- the settings switches: mlflow=False writes nothing to MLflow with the package installed.

How it runs the package: the integration packages (mlflow-skinny, wandb: requirements.txt) are in the
project venv, not in build/pyvenv (the package's own venv holds what the package needs). The fits
run with the project venv's Python importing the installed package from build/pyvenv's
site-packages (only the lucid_yolo folder is put on PYTHONPATH, through a link), so the package is the
installed one and torch, numpy and the integration packages are the project venv's (the same pinned
torch the package was built with)."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import LUCID, check, failures, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402

STANDINS = Path(__file__).resolve().parent / "integration_standins"
INTEGRATIONS = ("clearml", "comet", "dvc", "mlflow", "neptune", "wandb")
FIT = """
import sys
from lucid_yolo import YOLO
YOLO('yolo26n-seg.yaml').train(data=sys.argv[1], epochs=2, imgsz=64, batch=4, workers=1, device='cpu',
                               project=sys.argv[2], name=sys.argv[3], close_mosaic=1)
"""
LOSSES = ("box_loss", "seg_loss", "cls_loss", "l1_loss", "sem_loss")
METRICS = tuple(f"metrics/{m}({t})" for t in "BM" for m in ("precision", "recall", "mAP50", "mAP50-95"))
EPOCH_KEYS = {*(f"train/{n}" for n in LOSSES), *(f"val/{n}" for n in LOSSES), *METRICS, "lr/pg0", "lr/pg1",
              "lr/pg2"}


def package_dir():
    r = subprocess.run([str(PACKAGE_PYTHON), "-c", "import lucid_yolo, os; print(os.path.dirname(lucid_yolo.__file__))"],
                       capture_output=True, text=True, cwd="/", check=True)
    return Path(r.stdout.strip())


def settings(env, **on):
    """The settings file of the run: each integration on or off."""
    values = [f"{k}={'True' if on.get(k, False) else 'False'}" for k in INTEGRATIONS]
    subprocess.run([str(LUCID), "settings", *values], env=env, capture_output=True, check=True)


def fit(tmp, env, data, name, python=sys.executable, script=FIT, extra_path=()):
    env = dict(env, PYTHONPATH=os.pathsep.join([*map(str, extra_path), str(tmp / "pkg")]))
    r = subprocess.run([python, "-c", script, str(data), str(tmp / "runs"), name], env=env, capture_output=True,
                       text=True, cwd=tmp / "work")
    if r.returncode != 0:
        sys.exit(f"the fit {name} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return tmp / "runs" / name, r.stdout + r.stderr


def mlflow_run(uri, experiment):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id]) if exp else []
    check(len(runs) == 1, f"MLflow: one run in experiment {experiment} ({len(runs)})")
    run = runs[0]
    history = {k: sorted(m.step for m in client.get_metric_history(run.info.run_id, k)) for k in run.data.metrics}
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    artifacts |= {a.path for a in client.list_artifacts(run.info.run_id, "weights")}
    return run, history, artifacts


def test_mlflow(tmp, env, data):
    uri = (tmp / "mlruns").as_uri()
    settings(env, mlflow=True)
    run_dir, out = fit(tmp, dict(env, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="lucid-test",
                                 MLFLOW_RUN="named-run"), data, "mlflow")
    check("MLflow: logging run_id" in out, "MLflow: the run is announced")
    run, history, artifacts = mlflow_run(uri, "lucid-test")
    check(run.info.run_name == "named-run" and run.info.status == "FINISHED",
          f"MLflow: MLFLOW_RUN names the run, FINISHED ({run.info.run_name}, {run.info.status})")
    args_keys = {line.split(":")[0] for line in (run_dir / "args.yaml").read_text().splitlines() if ":" in line}
    check(set(run.data.params) == args_keys, f"MLflow: params are args.yaml's {len(args_keys)} keys "
          f"({sorted(set(run.data.params) ^ args_keys)[:6]})")
    want = {k.replace("(", "").replace(")", "") for k in EPOCH_KEYS}
    check(set(history) == want, f"MLflow: metric keys as the reference names them ({sorted(set(history) ^ want)})")
    check(all(steps[:2] == [0, 1] for steps in history.values()), "MLflow: each metric at steps 0 and 1")
    check(history["metrics/mAP50-95M"] == [0, 1, 1], "MLflow: the final validation logged at the last epoch's step")
    want_files = {"weights", "weights/best.safetensors", "weights/last.safetensors", "results.csv", "args.yaml",
                  "results.png", "MaskPR_curve.png", "confusion_matrix.png", "train_batch0.jpg"}
    check(want_files <= artifacts, f"MLflow: artifacts {sorted(want_files - artifacts)} missing")


def leveldb_log_records(path):
    """The records of a .wandb file: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of
    chunks (crc32c 4, length 2, type 1: full, first, middle, last); a block's tail under 7 bytes is
    padding."""
    raw = Path(path).read_bytes()
    block, pos, parts = 32768, 7, []
    while pos + 7 <= len(raw):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(raw[pos + 4:pos + 6], "little"), raw[pos + 6]
        data = raw[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            break
        parts = [data] if kind in (1, 2) else parts + [data]
        if kind in (1, 4):
            yield b"".join(parts)


def wandb_records(run_file):
    """The history rows, the config and the artifacts of an offline run's .wandb file."""
    from wandb.proto import wandb_internal_pb2

    rows, config, artifacts = [], {}, []
    for data in leveldb_log_records(run_file):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            rows.append({i.key or i.nested_key[0]: json.loads(i.value_json) for i in rec.history.item})
        elif kind in ("config", "run"):  # wandb.init's config comes in the run record
            updates = rec.config.update if kind == "config" else rec.run.config.update
            config.update({i.key: json.loads(i.value_json) for i in updates})
        elif kind == "artifact":
            artifacts.append(rec.artifact)
    return rows, config, artifacts


def test_wandb(tmp, env, data):
    settings(env, wandb=True)
    run_dir, _ = fit(tmp, dict(env, WANDB_MODE="offline", WANDB_SILENT="true"), data, "wandb")
    files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    check(len(files) == 1, f"W&B: one offline run under save_dir/wandb ({len(files)})")
    if not files:
        return
    rows, config, artifacts = wandb_records(files[0])
    keys = {k for row in rows for k in row if not k.startswith("_")}
    plots = {"results", "MaskPR_curve", "confusion_matrix", "train_batch0"}
    want = EPOCH_KEYS | {"epoch", "model/parameters", "model/GFLOPs"} | plots
    check(want <= keys, f"W&B: history keys ({sorted(want - keys)} missing; extra {sorted(keys - want)[:6]})")
    epochs = [row["epoch"] for row in rows if "metrics/mAP50(M)" in row]
    check(epochs == [1, 2, 2], f"W&B: metrics at epochs 1, 2 and the final validation's 2 ({epochs})")
    args_keys = {line.split(":")[0] for line in (run_dir / "args.yaml").read_text().splitlines() if ":" in line}
    check(args_keys <= set(config), f"W&B: config holds args.yaml's keys ({sorted(args_keys - set(config))[:6]})")
    check(config.get("project") == str(tmp / "runs") and config.get("epochs") == 2, "W&B: config values")
    check(any(a.type == "model" and a.name.startswith("run_") for a in artifacts), "W&B: the best weights artifact")


def standin_calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_standins(tmp, env, data):
    log = tmp / "standins.jsonl"
    settings(env, clearml=True, comet=True, dvc=True, neptune=True)
    run_dir, _ = fit(tmp, dict(env, LUCID_STANDIN_LOG=str(log), MLFLOW_TRACKING_URI=(tmp / "off").as_uri()), data,
                     "standins", extra_path=[STANDINS])
    calls = standin_calls(log)
    by = {m: [c for c in calls if c["module"] == m] for m in ("comet_ml", "clearml", "neptune", "dvclive")}
    args_keys = {line.split(":")[0] for line in (run_dir / "args.yaml").read_text().splitlines() if ":" in line}
    check(not (tmp / "off").exists(), "settings mlflow=False: nothing written to MLflow (the package installed)")

    comet = by["comet_ml"]
    names = [c["name"] for c in comet]
    check(names[:1] == ["start"] and comet[0]["kwargs"]["project_name"] == str(tmp / "runs"), "Comet: start(project)")
    params = next((c["args"][0] for c in comet if c["name"] == "experiment.log_parameters"), {})
    check(set(params) == args_keys, "Comet: the args as parameters")
    metric_calls = [c for c in comet if c["name"] == "experiment.log_metrics"]
    keys = {k for c in metric_calls for k in c["args"][0]}
    check(EPOCH_KEYS | {"model/parameters", "model/GFLOPs"} == keys, f"Comet: metric keys ({sorted(keys ^ EPOCH_KEYS)})")
    check({(c["kwargs"]["epoch"], c["kwargs"]["step"]) for c in metric_calls} == {(1, 2), (2, 4)},
          "Comet: epoch 1-based, step = epochs done x 2 steps")
    check(any(c["name"] == "experiment.log_model" and c["args"][0] == "lucid" for c in comet), "Comet: the model")
    check(any(c["name"] == "experiment.log_table" and c["args"][0].endswith("results.csv") for c in comet),
          "Comet: results.csv as a table")
    check(names[-1] == "experiment.end", "Comet: the experiment ended")

    clear = by["clearml"]
    check(clear[:1] and clear[0]["name"] == "Task.init" and clear[0]["kwargs"]["task_name"] == "standins",
          "ClearML: Task.init(task_name=name)")
    connect = [c for c in clear if c["name"] == "task.connect"]
    check(connect and set(connect[0]["args"][0]) == args_keys and connect[0]["kwargs"]["name"] == "General",
          "ClearML: the args connected as General")
    scalars = {(c["args"][0], c["args"][1], c["kwargs"].get("iteration")) for c in clear
               if c["name"] == "logger.report_scalar" and len(c["args"]) >= 2}
    want = {(k.split("/")[0], k, e) for k in EPOCH_KEYS for e in (0, 1)}
    check(want <= scalars, f"ClearML: scalars by title, series and iteration ({len(want - scalars)} missing)")
    singles = {c["args"][0] for c in clear if c["name"] == "logger.report_single_value"}
    check({"model/parameters", "model/GFLOPs", "fitness", *METRICS} <= singles, "ClearML: single values")
    check(any(c["name"] == "task.update_output_model" and c["kwargs"]["model_path"].endswith("best.safetensors")
              for c in clear), "ClearML: the best weights as the output model")

    nep = by["neptune"]
    check(nep[:1] and nep[0]["name"] == "init_run" and nep[0]["kwargs"]["name"] == "standins", "Neptune: init_run")
    hyper = [c for c in nep if c["name"] == "assign" and c["args"][0] == "Configuration/Hyperparameters"]
    check(hyper and set(hyper[0]["args"][1]) == args_keys, "Neptune: the args as Configuration/Hyperparameters")
    appended = {(c["args"][0], c["kwargs"]["step"]) for c in nep if c["name"] == "append"}
    want = {(k, e) for k in EPOCH_KEYS for e in (1, 2)}
    check(want <= appended, f"Neptune: series at steps 1 and 2 ({sorted(want - appended)[:4]} missing)")
    uploads = {c["args"][0] for c in nep if c["name"] == "upload"}
    check("weights/standins/best.safetensors" in uploads and "Plots/results" in uploads and "Mosaic/train_batch0" in
          uploads, f"Neptune: uploads ({sorted(uploads)[:8]})")

    dvc = by["dvclive"]
    check(dvc[:1] and dvc[0]["name"] == "Live" and dvc[0]["kwargs"] == {"save_dvc_exp": True, "cache_images": True},
          "DVC: Live(save_dvc_exp, cache_images)")
    check([set(c["args"][0]) for c in dvc if c["name"] == "live.log_params"] == [args_keys], "DVC: the args as params")
    plotted = [c["args"][0] for c in dvc if c["name"] == "live.log_metric" and c["kwargs"].get("plot", True)]
    check(sorted(plotted) == sorted(list(EPOCH_KEYS) * 2), "DVC: each epoch's metrics, plotted, twice")
    check(sum(c["name"] == "live.next_step" for c in dvc) == 2, "DVC: next_step after each epoch")
    images = {c["args"][0] for c in dvc if c["name"] == "live.log_image"}
    check({"train/train_batch/0.jpg", "val/results.png"} <= images or {"train/train_batch/0.jpg"} <= images,
          f"DVC: images, batches grouped ({sorted(images)[:6]})")
    check(any(c["name"] == "live.log_artifact" and c["kwargs"] == {"copy": True, "type": "model"} for c in dvc),
          "DVC: the best weights as a model artifact")
    check([c["name"] for c in dvc][-1:] == ["live.end"], "DVC: the Live ended")


def main():
    require_package()
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps its file store behind this switch
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        env["LUCID_CONFIG_DIR"] = str(tmp / "config")
        env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "2")
        (tmp / "work").mkdir()
        (tmp / "pkg").mkdir()
        (tmp / "pkg" / "lucid_yolo").symlink_to(package_dir())
        data = synth_data(tmp / "synth", env, 8, 4, 64)
        test_mlflow(tmp, env, data)
        test_wandb(tmp, env, data)
        test_standins(tmp, env, data)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
