"""Neptune: a run (neptune.init_run, project= else "lucid", name=, tag "lucid"; NEPTUNE_PROJECT and
NEPTUNE_API_TOKEN as neptune reads them) with the run's arguments under
Configuration/Hyperparameters; per epoch the training losses, learning rates and validation metrics
appended at step = the 1-based epoch, the model's size under Configuration/Model after the first, the
mosaic batches of the second epoch (Mosaic/); at the end the validation images (Validation/), the
results, confusion-matrix and curve plots (Plots/) and the best weights under weights/<name>/."""
from pathlib import Path

from . import _run

PREFIX = "Neptune"
neptune = None
File = None


def available():
    global neptune, File
    try:
        import neptune as module
        from neptune.types import File as file_type

        if not hasattr(module, "__version__"):
            return False
        neptune, File = module, file_type
        return True
    except ImportError:
        return False


def _neptune_run(trainer):
    return _run.state(trainer, "neptune").get("run")


def _scalars(run, values, step):
    for k, v in values.items():
        run[k].append(value=v, step=step)


def _images(run, files, group):
    for f in files:
        run[f"{group}/{f.stem}"].upload(File(str(f)))


def on_start(trainer):
    s = _run.state(trainer, "neptune")
    if s.get("tried"):
        return
    s["tried"] = True
    args = _run.args(trainer)
    try:
        run = neptune.init_run(project=getattr(args, "project", None) or "lucid", name=getattr(args, "name", None),
                               tags=["lucid"])
        run["Configuration/Hyperparameters"] = {k: "" if v is None else v for k, v in vars(args).items()}
        s["run"] = run
    except Exception as e:
        _run.warn(PREFIX, f"not initialized, not logging this run: {e}")


def on_train_epoch_end(trainer):
    if run := _neptune_run(trainer):
        _scalars(run, _run.losses(trainer), trainer.epoch + 1)
        _scalars(run, trainer.lr, trainer.epoch + 1)
        if trainer.epoch == 1:
            _images(run, sorted(Path(trainer.save_dir).glob("train_batch*.jpg")), "Mosaic")


def on_fit_epoch_end(trainer):
    if run := _neptune_run(trainer):
        _run.note_fit_epoch_end(trainer, "neptune")
        if trainer.epoch == 0:
            run["Configuration/Model"] = _run.model_info(trainer)
        _scalars(run, trainer.metrics, _run.epoch(trainer) + 1)


def on_train_end(trainer):
    run = _neptune_run(trainer)
    if not run:
        return
    if _run.final_validation_unlogged(trainer, "neptune"):
        _scalars(run, _run.final_validation(trainer), _run.epoch(trainer) + 1)
    save_dir = Path(trainer.save_dir)
    _images(run, sorted(save_dir.glob("val*.jpg")), "Validation")
    names = ["results.png", "confusion_matrix.png", "confusion_matrix_normalized.png",
             *(f"{p}{c}_curve.png" for p in ("Box", "Mask") for c in ("F1", "PR", "P", "R"))]
    _images(run, [save_dir / n for n in names if (save_dir / n).exists()], "Plots")
    if trainer.best is not None and trainer.best.exists():
        args = _run.args(trainer)
        run[f"weights/{getattr(args, 'name', None) or 'segment'}/{trainer.best.name}"].upload(File(str(trainer.best)))


def callbacks():
    return _run.callback_table(PREFIX, "on_pretrain_routine_start", on_start,
                               on_train_epoch_end=on_train_epoch_end,
                               on_fit_epoch_end=on_fit_epoch_end,
                               on_train_end=on_train_end)
