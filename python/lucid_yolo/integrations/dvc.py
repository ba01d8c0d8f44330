"""DVC (DVCLive): a dvclive.Live (save_dvc_exp=True, cache_images=True: an experiment where the folder
is a DVC repository; dvclive's own files, dvclive/, otherwise) with the run's arguments as params;
after each epoch's validation the training losses, validation metrics and learning rates as metrics
and the new plots as images (batches grouped for dvclive's slider), then the next step; the model's
size after the first; at the end the final metrics (plot=False), plots, and the best weights as a
model artifact, and the Live ended. DVCLive's own variables (DVCLIVE_LOGLEVEL, DVC_EXP_*...) apply."""
import os
import re
from pathlib import Path

from . import _run

PREFIX = "DVCLive"
dvclive = None


def available():
    global dvclive
    try:
        import dvclive as module

        dvclive = module
        return True
    except ImportError:
        return False


def _live(trainer):
    return _run.state(trainer, "dvc").get("live")


def _log_images(live, trainer, which, prefix):
    for path in _run.new_plots(trainer, _run.state(trainer, "dvc_plots"), which):
        name = path.name
        if m := re.search(r"_batch(\d+)", name):  # batches grouped, one slider
            name = (Path(re.sub(r"_batch(\d+)", "_batch", path.stem)) / m[1]).with_suffix(path.suffix)
        live.log_image(os.path.join(prefix, name), path)


def on_pretrain_routine_start(trainer):
    s = _run.state(trainer, "dvc")
    if s.get("tried"):
        return
    s["tried"] = True
    try:
        s["live"] = dvclive.Live(save_dvc_exp=True, cache_images=True)
        print(f"{PREFIX}: logging this run (disable with 'lucid settings dvc=False')")
    except Exception as e:
        _run.warn(PREFIX, f"not initialized, not logging this run: {e}")


def on_train_start(trainer):
    on_pretrain_routine_start(trainer)  # where on_pretrain_routine_start was not raised
    if live := _live(trainer):
        _log_images(live, trainer, "train", "train")
        live.log_params(vars(_run.args(trainer)))


def on_train_epoch_start(trainer):
    _run.state(trainer, "dvc")["training_epoch"] = True


def _all_metrics(trainer):
    return {**_run.losses(trainer), **trainer.metrics, **trainer.lr}


def on_fit_epoch_end(trainer):
    s = _run.state(trainer, "dvc")
    live = s.get("live")
    if not live or not s.get("training_epoch"):  # the final validation is logged by on_train_end
        return
    for metric, value in _all_metrics(trainer).items():
        live.log_metric(metric, value)
    if trainer.epoch == 0:
        for metric, value in _run.model_info(trainer).items():
            live.log_metric(metric, value, plot=False)
    _log_images(live, trainer, "train", "train")
    _log_images(live, trainer, "val", "val")
    live.next_step()
    s["training_epoch"] = False


def on_train_end(trainer):
    live = _live(trainer)
    if not live:
        return
    final = {**_run.losses(trainer), **_run.final_validation(trainer), **trainer.lr}
    for metric, value in final.items():
        live.log_metric(metric, value, plot=False)
    _log_images(live, trainer, None, "val")
    if trainer.best is not None and trainer.best.exists():
        live.log_artifact(trainer.best, copy=True, type="model")
    live.end()


def callbacks():
    return {
        "on_pretrain_routine_start": _run.guarded(PREFIX)(on_pretrain_routine_start),
        "on_train_start": _run.guarded(PREFIX)(on_train_start),
        "on_train_epoch_start": _run.guarded(PREFIX)(on_train_epoch_start),
        "on_fit_epoch_end": _run.guarded(PREFIX)(on_fit_epoch_end),
        "on_train_end": _run.guarded(PREFIX)(on_train_end),
    }
