"""Weights & Biases: a run in project= (else "lucid") named name= with the run's arguments as its
config, written under the run folder (save_dir/wandb); after each epoch the training losses, learning
rates, validation metrics and new plots with "epoch" (1-based) as the step metric of the train/, lr/,
metrics/ and val/ keys, the model's size after the first; at the end the best weights as a model
artifact (alias best), the plots, and the run finished. WANDB_MODE (offline, disabled), WANDB_PROJECT
and the package's other variables apply as wandb reads them; a run started by the user is logged into
and left open. A resumed fit continues the run of the newest wandb/*run-*/run-<id>.wandb file."""
import re
from datetime import datetime
from pathlib import Path

from . import _run

PREFIX = "wandb"
wb = None


def available():
    global wb
    try:
        import wandb as module

        if not hasattr(module, "__version__"):
            return False
        wb = module
        return True
    except ImportError:
        return False


def on_start(trainer):
    s = _run.state(trainer, "wandb")
    if s.get("tried"):
        return
    s["tried"] = True
    args = _run.args(trainer)
    if not wb.run:
        name = str(getattr(args, "name", None))
        runs = (Path(trainer.save_dir) / "wandb").glob("*run-*/run-*.wandb")
        resuming = getattr(args, "resume", False) and max(runs, key=lambda f: f.stat().st_mtime, default=None)
        stamp = datetime.now().astimezone().strftime("%Y%m%d_%H%M%S")
        wb.init(
            project=re.sub(r"[/\\#?%:]", "-", str(getattr(args, "project", None) or "lucid"))[-128:],
            name=name,
            config=vars(args),
            id=resuming.stem[4:] if resuming else f"{re.sub('[^A-Za-z0-9_.-]', '_', name)[:64]}_{stamp}",
            resume="allow" if resuming else None,
            dir=str(trainer.save_dir),
        )
        s["started"] = True
        for prefix in ("train", "lr", "metrics", "val"):
            wb.run.define_metric(f"{prefix}/*", step_metric="epoch")
    wb.run.config.setdefaults(vars(args))  # values the user or a sweep set already are kept


def _log_plots(trainer):
    seen = _run.state(trainer, "wandb_plots")
    for f in _run.new_plots(trainer, seen):
        wb.run.log({f.stem: wb.Image(str(f))}, commit=False)


def on_train_epoch_end(trainer):
    if not wb.run:
        return
    wb.run.log({**_run.losses(trainer), "epoch": trainer.epoch + 1}, commit=False)
    wb.run.log(trainer.lr, commit=False)


def on_fit_epoch_end(trainer):
    if not wb.run:
        return
    _run.note_fit_epoch_end(trainer, "wandb")
    _log_plots(trainer)
    if trainer.epoch == 0:
        wb.run.log(_run.model_info(trainer), commit=False)
    wb.run.log({**trainer.metrics, "epoch": _run.epoch(trainer) + 1}, commit=True)


def on_train_end(trainer):
    if not wb.run:
        return
    if _run.final_validation_unlogged(trainer, "wandb"):  # as the reference's last on_fit_epoch_end
        wb.run.log({**_run.final_validation(trainer), "epoch": _run.epoch(trainer) + 1}, commit=True)
    _log_plots(trainer)
    args = _run.args(trainer)
    if getattr(args, "save", True) and trainer.best is not None and trainer.best.exists():
        art = wb.Artifact(type="model", name=f"run_{wb.run.id}_model")
        art.add_file(str(trainer.best))
        wb.run.log_artifact(art, aliases=["best"])
    wb.run.log({"epoch": _run.epoch(trainer) + 1}, commit=True)
    if _run.state(trainer, "wandb").pop("started", False):
        wb.finish()


def on_teardown(trainer):
    if _run.state(trainer, "wandb").pop("started", False):
        wb.finish(exit_code=1)


def callbacks():
    return _run.callback_table(PREFIX, "on_pretrain_routine_end", on_start,
                               on_train_epoch_end=on_train_epoch_end,
                               on_fit_epoch_end=on_fit_epoch_end,
                               on_train_end=on_train_end,
                               teardown=on_teardown)
