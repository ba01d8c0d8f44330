"""Callbacks by the reference's event names, and the trainer object they receive."""
from pathlib import Path

import torch

# The events a fit raises, in order (train/fit_events.h); the reference's other trainer events are
# accepted by add_callback but never raised.
FIT_EVENTS = ("on_train_start", "on_train_epoch_start", "on_train_batch_end", "on_train_epoch_end",
              "on_model_save", "on_fit_epoch_end", "on_train_end")
REFERENCE_EVENTS = FIT_EVENTS + ("on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_batch_start",
                                 "optimizer_step", "on_before_zero_grad", "on_params_update", "teardown",
                                 "on_val_start", "on_val_batch_start", "on_val_batch_end", "on_val_end",
                                 "on_predict_start", "on_predict_batch_start", "on_predict_batch_end",
                                 "on_predict_postprocess_end", "on_predict_end", "on_export_start", "on_export_end")


def default_callbacks():
    return {event: [] for event in REFERENCE_EVENTS}


class Trainer:
    """What a training callback reads, as the reference's trainer names it: epoch (0-based),
    epochs, tloss and loss_items (tensors of box, seg, cls, dfl, sem loss), loss_names, metrics
    (the last validation: ``metrics/...`` and ``val/...`` keys), fitness, lr (``lr/pgN``),
    save_dir, wdir, best, last, args; label_loss_items()."""

    def __init__(self, args):
        self.args = dict(args)
        self.epoch = 0
        self.epochs = int(args.get("epochs", 0) or 0)
        self.batch_i = 0
        self.loss_names = []
        self.tloss = None
        self.loss_items = None
        self.metrics = {}
        self.fitness = None
        self.lr = {}
        self.save_dir = None

    wdir = property(lambda self: self.save_dir / "weights" if self.save_dir else None)
    best = property(lambda self: self.wdir / "best.safetensors" if self.save_dir else None)
    last = property(lambda self: self.wdir / "last.safetensors" if self.save_dir else None)

    def label_loss_items(self, loss_items=None, prefix="train"):
        keys = [f"{prefix}/{n}" for n in self.loss_names]
        if loss_items is None:
            return keys
        return {k: round(float(v), 5) for k, v in zip(keys, loss_items)}

    def update(self, e):
        """Takes in a native fit event (fit_events.h as a dict)."""
        self.epoch, self.epochs, self.batch_i = e["epoch"], e["epochs"], e["batch"]
        self.save_dir = Path(e["save_dir"])
        if e["event"] == "on_train_end":
            self.metrics.update(_metrics_dict(e["metrics"]))
            self.fitness = e["fitness"]
            return
        self.loss_names = list(e["loss_names"])
        self.tloss = torch.tensor(e["tloss"])
        self.loss_items = torch.tensor(e["loss_items"])
        self.lr = {f"lr/pg{i}": v for i, v in enumerate(e["lr"])}
        if e["validated"]:
            self.metrics = {**_metrics_dict(e["metrics"]), **self.label_loss_items(e["val_losses"], prefix="val")}
            self.fitness = e["fitness"]


_METRIC_KEYS = ("metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)",
                "metrics/precision(M)", "metrics/recall(M)", "metrics/mAP50(M)", "metrics/mAP50-95(M)")


def _metrics_dict(values):
    return dict(zip(_METRIC_KEYS, values))
