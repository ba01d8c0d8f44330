"""What the integrations read of a training run beyond the trainer object: the run's full arguments
(its args.yaml, every key the fit used), the epoch as the reference counts it, the run's plots, the
model's size, and a guard that keeps a logging failure from stopping the training."""
import functools
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from ..yaml_scalar import scalar

PLOT_SUFFIXES = (".png", ".jpg")


def warn(prefix, message):
    print(f"WARNING {prefix}: {message}", file=sys.stderr)


def guarded(prefix):
    """A callback that warns instead of raising (a logger's failure never stops the fit)."""

    def wrap(func):
        @functools.wraps(func)
        def call(trainer, *args, **kwargs):
            try:
                return func(trainer, *args, **kwargs)
            except Exception as e:
                warn(prefix, f"{func.__name__} failed, not logged: {type(e).__name__}: {e}")

        return call

    return wrap


def callback_table(prefix, start_event, on_start, **events):
    """An integration's callbacks, each guarded: on_start at start_event and at on_train_start (the first
    of the two that fires starts the run), then events as event name -> function."""
    start = guarded(prefix)(on_start)
    table = {start_event: start, "on_train_start": start}
    table.update({event: guarded(prefix)(func) for event, func in events.items()})
    return table


def _read_args_yaml(path):
    text = path.read_text()
    try:
        import yaml
    except ImportError:  # args.yaml is flat `key: value` lines
        out = {}
        for line in text.splitlines():
            key, colon, value = line.partition(":")
            if colon and key.strip() and not line.startswith((" ", "#")):
                out[key.strip()] = scalar(value.strip())
        return out
    return yaml.safe_load(text) or {}


def args(trainer):
    """The run's arguments as a namespace: its args.yaml (every key, defaults included) over what the
    trainer was given; read once per run."""
    cached = getattr(trainer, "_integration_args", None)
    if cached is not None:
        return cached
    values = dict(trainer.args)
    yaml_path = Path(trainer.save_dir) / "args.yaml" if trainer.save_dir else None
    if yaml_path is not None and yaml_path.is_file():
        values.update(_read_args_yaml(yaml_path))
        trainer._integration_args = SimpleNamespace(**values)
        return trainer._integration_args
    return SimpleNamespace(**values)


def epoch(trainer):
    """The 0-based epoch as the reference's trainer holds it: after the loop (the final validation,
    on_train_end) the last epoch's."""
    return min(trainer.epoch, max(trainer.epochs - 1, 0))


def losses(trainer):
    return trainer.label_loss_items(trainer.tloss, prefix="train") if trainer.tloss is not None else {}


def final_validation(trainer):
    """The final validation's metrics as the reference's trainer holds them then (no val/ losses)."""
    return {k: v for k, v in trainer.metrics.items() if k.startswith("metrics/")}


def final_metrics(trainer):
    """The final validation's results as the reference's results_dict: the metrics and fitness."""
    out = {k: v for k, v in trainer.metrics.items() if k.startswith("metrics/")}
    if trainer.fitness is not None:
        out["fitness"] = trainer.fitness
    return out


def plots(trainer):
    """The run folder's plots and their modification times (the reference's trainer and validator
    plots: results.png, curves, confusion matrices, labels, train and val batches)."""
    save_dir = Path(trainer.save_dir)
    return {f: f.stat().st_mtime for f in sorted(save_dir.glob("*")) if f.suffix in PLOT_SUFFIXES and f.is_file()}


def is_val_plot(path):
    return not re.match(r"(train_batch|labels|results)", Path(path).name)


def new_plots(trainer, seen, which=None):
    """Plots that are new or rewritten since `seen` (path -> mtime, updated); which: "train", "val" or both."""
    out = []
    for f, mtime in plots(trainer).items():
        if which is not None and is_val_plot(f) != (which == "val"):
            continue
        if seen.get(f) != mtime:
            seen[f] = mtime
            out.append(f)
    return out


def model_info(trainer):
    """The reference's model/parameters and model/GFLOPs (at the run's imgsz) of the run's weights."""
    from .. import _lucid

    weights = trainer.last if trainer.last is not None and trainer.last.exists() else None
    if weights is None:
        return {}
    imgsz = args(trainer).imgsz
    imgsz = max(imgsz) if isinstance(imgsz, (list, tuple)) else imgsz
    _, parameters, _, gflops, _, _ = _lucid.model_info([f"model={weights}", f"imgsz={imgsz}"])
    return {"model/parameters": parameters, "model/GFLOPs": round(gflops, 3)}


def state(trainer, key, factory=dict):
    """Per-run state of one integration, kept on the trainer."""
    name = f"_integration_{key}"
    if not hasattr(trainer, name):
        setattr(trainer, name, factory())
    return getattr(trainer, name)


def mark_epoch_start(trainer):
    state(trainer, "clock")["epoch_start"] = time.time()


def epoch_time(trainer):
    start = state(trainer, "clock").get("epoch_start")
    return round(time.time() - start, 3) if start else 0.0


def steps_per_epoch(trainer):
    """Batches per epoch: the last batch index of the epoch's on_train_batch_end plus one."""
    return int(trainer.batch_i) + 1


def note_fit_epoch_end(trainer, key):
    fits = state(trainer, f"{key}_fits")
    fits[epoch(trainer)] = fits.get(epoch(trainer), 0) + 1


def final_validation_unlogged(trainer, key):
    """Whether the final validation (of the best weights) has had no on_fit_epoch_end of its own: the
    reference raises one after the last epoch's; an integration logs it at on_train_end otherwise."""
    return state(trainer, f"{key}_fits").get(epoch(trainer), 0) < 2
