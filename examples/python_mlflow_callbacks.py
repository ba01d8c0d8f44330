"""Logging a lucid_yolo fit to MLflow (or W&B) through the reference's callback names.

    pip install mlflow        # or wandb
    python examples/python_mlflow_callbacks.py data.yaml
"""
import sys

import mlflow  # W&B: import wandb; wandb.init(project="lucid"); log = wandb.log
from lucid_yolo import YOLO

model = YOLO("yolo26n-seg.yaml")
model.add_callback("on_train_start", lambda t: mlflow.log_params(t.args))
model.add_callback("on_train_epoch_end", lambda t: mlflow.log_metrics(
    {**t.label_loss_items(t.tloss, prefix="train"), **t.lr}, step=t.epoch))
model.add_callback("on_fit_epoch_end", lambda t: mlflow.log_metrics(
    {k.replace("(", "_").replace(")", ""): v for k, v in t.metrics.items()}, step=t.epoch))
model.add_callback("on_train_end", lambda t: mlflow.log_artifact(str(t.best)))
with mlflow.start_run():
    model.train(data=sys.argv[1] if len(sys.argv) > 1 else None, epochs=3, imgsz=320)
