"""Callbacks by the reference's event names, and the objects they receive: a trainer, a validator,
a predictor or an exporter stand-in with the attributes the reference's callbacks commonly read.

The events and where they are raised (the order of a fit: docs/python.md):

- train: on_pretrain_routine_start, on_pretrain_routine_end, on_train_start, then per epoch
  on_train_epoch_start, per batch on_train_batch_start / on_train_batch_end, on_train_epoch_end,
  the validator's events, on_model_save, on_fit_epoch_end; after the fit the final validation's
  validator events, on_fit_epoch_end (at epoch + 1), on_train_end, teardown;
- val (also inside a fit, with the validator): on_val_start, per batch on_val_batch_start /
  on_val_batch_end, on_val_end;
- predict: on_predict_start, per batch on_predict_batch_start, on_predict_postprocess_end,
  on_predict_batch_end, then on_predict_end;
- export: on_export_start, on_export_end.

optimizer_step and on_before_zero_grad are accepted and never raised, as the reference's trainer
raises neither. The per-batch events cost the native loop nothing while no callback is added for
them (the native side asks which events have callbacks: ``wanted``)."""
from pathlib import Path
from types import SimpleNamespace

import torch

TRAIN_EVENTS = ("on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_start", "on_train_epoch_start",
                "on_train_batch_start", "on_train_batch_end", "on_train_epoch_end", "on_model_save",
                "on_fit_epoch_end", "on_train_end", "teardown")
VAL_EVENTS = ("on_val_start", "on_val_batch_start", "on_val_batch_end", "on_val_end")
PREDICT_EVENTS = ("on_predict_start", "on_predict_batch_start", "on_predict_postprocess_end", "on_predict_batch_end",
                  "on_predict_end")
EXPORT_EVENTS = ("on_export_start", "on_export_end")
# The fit's own events before this module raised the others (kept for code that imported it).
FIT_EVENTS = ("on_train_start", "on_train_epoch_start", "on_train_batch_end", "on_train_epoch_end",
              "on_model_save", "on_fit_epoch_end", "on_train_end")
# Every event add_callback accepts: the reference's list (utils/callbacks/base.py's names).
REFERENCE_EVENTS = TRAIN_EVENTS + ("optimizer_step", "on_before_zero_grad") + VAL_EVENTS + PREDICT_EVENTS + \
    EXPORT_EVENTS

# Functions added to every new model's callbacks (integrations register theirs here): event -> list.
_DEFAULTS = {event: [] for event in REFERENCE_EVENTS}


def add_default_callback(event, func):
    """Adds func to the callbacks of every YOLO object created from now on (as the reference's
    integrations add theirs to its default callbacks)."""
    if event not in _DEFAULTS:
        raise ValueError(f"unknown callback event {event!r}; events: {', '.join(REFERENCE_EVENTS)}")
    _DEFAULTS[event].append(func)


def default_callbacks():
    """A fresh event -> list of functions dict: the default callbacks (none unless added)."""
    return {event: list(funcs) for event, funcs in _DEFAULTS.items()}


def run_callbacks(callbacks, event, obj):
    for func in list(callbacks.get(event, [])):
        func(obj)


def wanted(callbacks):
    """The events with at least one callback (the native side raises per-batch events only for them)."""
    return [event for event, funcs in callbacks.items() if funcs]


class Args(SimpleNamespace):
    """The options of a call, read as attributes (trainer.args.epochs) as the reference's args are,
    and as a dict (args.get("epochs"), args["epochs"], vars(args), iteration over (key, value))."""

    def __init__(self, d):
        super().__init__(**{str(k): v for k, v in dict(d).items()})

    def __iter__(self):
        return iter(vars(self).items())

    def __getitem__(self, key):
        return vars(self)[key]

    def __contains__(self, key):
        return key in vars(self)

    def __getattr__(self, key):  # options not given: None, as the reference's defaults read unset
        if key.startswith("__"):
            raise AttributeError(key)
        return None

    def get(self, key, default=None):
        return vars(self).get(key, default)

    def keys(self):
        return vars(self).keys()


class Trainer:
    """What a training callback reads, as the reference's trainer names it: epoch (0-based), epochs,
    loss_names, tloss (the epoch's running means) and loss_items (the last batch's) as dicts of loss
    name -> 0-d tensor as the reference's are, metrics (``metrics/...`` and ``val/...`` keys: the
    last validation), fitness, lr (``lr/pgN``), save_dir, wdir, best, last, args, validator,
    batch_i; label_loss_items()."""

    def __init__(self, args):
        self.args = Args(args)
        self.epoch = 0
        self.epochs = int(self.args.get("epochs", 0) or 0)
        self.batch_i = 0
        self.loss_names = ()
        self.tloss = None
        self.loss_items = None
        self.metrics = {}
        self.fitness = None
        self.lr = {}
        self.save_dir = None
        self.validator = Validator(args, training=True)

    wdir = property(lambda self: self.save_dir / "weights" if self.save_dir else None)
    best = property(lambda self: self.wdir / "best.safetensors" if self.save_dir else None)
    last = property(lambda self: self.wdir / "last.safetensors" if self.save_dir else None)

    def label_loss_items(self, loss_items=None, prefix="train"):
        """The loss keys (``train/box_loss`` ...) without loss_items, else {key: rounded value} for a
        dict of name -> value (tloss, loss_items) or a sequence in loss_names' order."""
        if loss_items is None:
            return [f"{prefix}/{n}" for n in self.loss_names]
        items = loss_items.items() if isinstance(loss_items, dict) else zip(self.loss_names, loss_items)
        return {f"{prefix}/{k}": round(float(v), 5) for k, v in items}

    def _losses(self, values):
        return {n: torch.tensor(float(v)) for n, v in zip(self.loss_names, values)}

    def update(self, e):
        """Takes in a native fit event (fit_events.h as a dict)."""
        self.epoch, self.epochs, self.batch_i = e["epoch"], e["epochs"], e["batch"]
        if e["save_dir"]:
            self.save_dir = Path(e["save_dir"])
            self.validator.save_dir = self.save_dir
        event = e["event"]
        if event == "on_pretrain_routine_start":
            return
        if event in ("on_train_end",) or (event == "on_fit_epoch_end" and not e["training"]):
            # The final validation of the best weights (no validation losses), as the reference's final_eval.
            self.metrics = _metrics_dict(e["metrics"])
            self.fitness = e["fitness"]
            return
        self.loss_names = tuple(e["loss_names"])
        if event == "on_pretrain_routine_end":
            self.metrics = dict.fromkeys(list(_METRIC_KEYS) + self.label_loss_items(prefix="val"), 0)
        self.lr = {f"lr/pg{i}": v for i, v in enumerate(e["lr"])}
        if event == "on_train_epoch_start":
            self.tloss = None  # as the reference: each epoch's running means start again
        elif event in ("on_train_batch_end", "on_train_epoch_end"):
            self.tloss = self._losses(e["tloss"])
            self.loss_items = self._losses(e["loss_items"])
        if e["validated"] and event in ("on_model_save", "on_fit_epoch_end"):
            self.metrics = {**_metrics_dict(e["metrics"]), **self.label_loss_items(e["val_losses"], prefix="val")}
            self.fitness = e["fitness"]


class Validator:
    """What a validation callback reads: training (inside a fit), batch_i, save_dir, args, names,
    metrics (on_val_end: the SegmentMetrics the call returns; None before), speed."""

    def __init__(self, args, training=False, names=None):
        self.args = Args(args)
        self.training = training
        self.batch_i = 0
        self.save_dir = None
        self.names = dict(enumerate(names or []))
        self.metrics = None
        self.speed = {}

    def update(self, e):
        from .metrics import SegmentMetrics

        self.training = e["training"]
        if e["event"] in ("on_val_batch_start", "on_val_batch_end"):
            self.batch_i = e["batch"]
        if e["save_dir"]:
            self.save_dir = Path(e["save_dir"])
        if e.get("val_results") is not None:
            self.metrics = SegmentMetrics(e["val_results"], list(self.names.values()) or _class_ids(e["val_results"]),
                                          self.save_dir or ".")
            self.speed = dict(e["val_results"]["speed"])


class Predictor:
    """What a prediction callback reads: results (the batch's Results, from
    on_predict_postprocess_end), batch ((paths, images, strings) of the batch, as the reference's;
    from on_predict_postprocess_end), seen (images so far), save_dir (None when nothing is written),
    args."""

    def __init__(self, args):
        self.args = Args(args)
        self.results = []
        self.seen = 0
        self.save_dir = None

    @property
    def batch(self):
        """(paths, BGR images, log strings) of the batch (built when read)."""
        if not self.results:
            return None
        return [r.path for r in self.results], [r.orig_img for r in self.results], [""] * len(self.results)

    def take_batch(self, results):
        self.results = results
        self.seen += len(results)
        if results and results[0].save_dir:
            self.save_dir = Path(results[0].save_dir)


class Exporter:
    """What an export callback reads: file (the model file exported), args (format, imgsz, ...),
    and after the export out (the written file or folder)."""

    def __init__(self, args, file):
        self.args = Args(args)
        self.file = Path(file)
        self.out = None


_METRIC_KEYS = ("metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)",
                "metrics/precision(M)", "metrics/recall(M)", "metrics/mAP50(M)", "metrics/mAP50-95(M)")


def _metrics_dict(values):
    return dict(zip(_METRIC_KEYS, values))


def _class_ids(d):
    return [str(i) for i in range(len(d["instances_per_class"]))]
