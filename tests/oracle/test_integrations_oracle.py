"""The reference package's MLflow integration on the fit that python.test_integrations gives lucid's
(lucid data synth, imgsz 64, 2 epochs on the CPU), with MLflow's file store: it logs the metric keys
that lucid's integration logs (tests/python/test_integrations.py, EPOCH_KEYS with the parentheses
dropped; the reference adds model/speed_PyTorch(ms), which lucid's fit does not hand to Python), at
steps 0 and 1, and its params hold every key of lucid's args.yaml for the same fit (lucid's params)."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from lucid_runs import LUCID, check, failures, synth_data  # noqa: E402
from test_integrations import EPOCH_KEYS, mlflow_run  # noqa: E402

REFERENCE_FIT = """
import sys
from ultralytics import YOLO
YOLO('yolo26n-seg.yaml').train(data=sys.argv[1], epochs=2, imgsz=64, batch=4, workers=0, device='cpu',
                               project=sys.argv[2], name=sys.argv[3], close_mosaic=1)
"""


def main():
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps its file store behind this switch
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        uri = (tmp / "mlruns").as_uri()
        env = dict(os.environ, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="reference",
                   YOLO_CONFIG_DIR=str(tmp / "ref_cfg"), LUCID_CONFIG_DIR=str(tmp / "cfg"))
        data = synth_data(tmp / "synth", env, 8, 4, 64)
        r = subprocess.run([sys.executable, "-c", "from ultralytics.utils import SETTINGS; SETTINGS.update(clearml="
                            "False, comet=False, dvc=False, wandb=False, tensorboard=False, mlflow=True)"],
                           env=env, capture_output=True, text=True)
        check(r.returncode == 0, f"the reference's settings written {r.stderr[-300:]}")
        r = subprocess.run([sys.executable, "-c", REFERENCE_FIT, str(data), str(tmp / "runs"), "reference"], env=env,
                           capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0:
            sys.exit(f"the reference's fit failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        run, history, _ = mlflow_run(uri, "reference")
        want = {k.replace("(", "").replace(")", "") for k in EPOCH_KEYS}
        check(set(history) - {"model/speed_PyTorch(ms)"} == want,
              f"the reference's MLflow metric keys are lucid's ({sorted(set(history) ^ want)})")
        check(all(steps[:2] == [0, 1] for steps in history.values()), "the reference's steps are 0 and 1, as lucid's")
        # lucid's params: its args.yaml for the same fit (the executable's run writes the same file).
        r = subprocess.run([str(LUCID), "train", f"data={data}", "model=yolo26n-seg.yaml", "epochs=1", "imgsz=64",
                            "batch=4", "device=cpu", f"project={tmp / 'runs'}", "name=lucid", "val=False"], env=env,
                           capture_output=True, text=True, cwd=tmp)
        check(r.returncode == 0, f"lucid train for its args.yaml {r.stderr[-300:]}")
        yaml = tmp / "runs" / "lucid" / "args.yaml"
        keys = {line.split(":")[0] for line in yaml.read_text().splitlines() if ":" in line} if yaml.exists() else set()
        extra = keys - set(run.data.params)
        check(keys and not extra, f"each of lucid's {len(keys)} params is a reference param ({sorted(extra)})")
        print(f"reference params that lucid's args.yaml does not hold: {len(set(run.data.params) - keys)}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
