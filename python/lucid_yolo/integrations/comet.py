"""Comet: an experiment (comet_ml.start, project COMET_PROJECT_NAME else project=) with the run's
arguments as parameters and the logging options as "others"; the training losses after each epoch's
steps, the validation metrics and learning rates after each validation (step = epochs done times the
steps of an epoch, epoch = 1-based), the model's size after the first; the best weights as the model
COMET_MODEL_NAME (else "lucid") at each save_period and at the end, then the curves, confusion
matrices, train and val batch images, results.csv as a table and args.yaml as an asset; the
experiment ends with the fit. COMET_START_ONLINE (or the older COMET_MODE=offline) chooses an offline
experiment; COMET_EVAL_BATCH_LOGGING_INTERVAL, COMET_MAX_IMAGE_PREDICTIONS and the confusion-matrix and
image-prediction switches are recorded as the reference records them."""
import os
from pathlib import Path

from . import _run

PREFIX = "Comet"
EVALUATION_PLOT_NAMES = ("F1_curve", "P_curve", "R_curve", "PR_curve")
comet_ml = None


def available():
    global comet_ml
    try:
        import comet_ml as module

        if not hasattr(module, "__version__"):
            return False
        comet_ml = module
        return True
    except ImportError:
        return False


def _flag(name, default):
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on", "y", "t")


def _options():
    return {
        "eval_batch_logging_interval": int(os.getenv("COMET_EVAL_BATCH_LOGGING_INTERVAL", "1")),
        "log_confusion_matrix_on_eval": _flag("COMET_EVAL_LOG_CONFUSION_MATRIX", False),
        "log_image_predictions": _flag("COMET_EVAL_LOG_IMAGE_PREDICTIONS", True),
        "max_image_predictions": int(os.getenv("COMET_MAX_IMAGE_PREDICTIONS", "100")),
    }


def on_start(trainer):
    s = _run.state(trainer, "comet")
    if s.get("tried"):
        return
    s["tried"] = True
    if os.getenv("COMET_START_ONLINE") is None:
        mode = os.getenv("COMET_MODE", "online")
        os.environ["COMET_START_ONLINE"] = "0" if mode == "offline" else "1"
    args = _run.args(trainer)
    try:
        experiment = comet_ml.start(project_name=os.getenv("COMET_PROJECT_NAME", getattr(args, "project", None)))
        experiment.log_parameters(vars(args))
        experiment.log_others(_options())
        experiment.log_other("Created from", "lucid")
    except Exception as e:
        _run.warn(PREFIX, f"not initialized, not logging this run: {e}")


def _metadata(trainer):
    """curr_epoch (1-based), curr_step, whether this epoch saves assets (save_period), final epoch."""
    s = _run.state(trainer, "comet")
    if trainer.epoch == 0 and "steps" not in s:
        s["steps"] = _run.steps_per_epoch(trainer)
    curr_epoch = _run.epoch(trainer) + 1
    args = _run.args(trainer)
    save_period = int(getattr(args, "save_period", -1) or -1)
    final = curr_epoch == trainer.epochs
    save_assets = bool(getattr(args, "save", True)) and save_period > 0 and curr_epoch % save_period == 0 and not final
    return curr_epoch, curr_epoch * s.get("steps", 1), save_assets


def _log_model(experiment, trainer):
    if trainer.best is not None and trainer.best.exists():
        experiment.log_model(os.getenv("COMET_MODEL_NAME", "lucid"), file_or_folder=str(trainer.best),
                             file_name=trainer.best.name, overwrite=True)


def _log_images(experiment, paths, step):
    for path in paths:
        if Path(path).exists():
            experiment.log_image(path, name=Path(path).stem, step=step)


def on_train_epoch_end(trainer):
    experiment = comet_ml.get_running_experiment()
    if not experiment:
        return
    curr_epoch, curr_step, _ = _metadata(trainer)
    experiment.log_metrics(_run.losses(trainer), step=curr_step, epoch=curr_epoch)


def on_fit_epoch_end(trainer):
    experiment = comet_ml.get_running_experiment()
    if not experiment:
        return
    _run.note_fit_epoch_end(trainer, "comet")
    curr_epoch, curr_step, save_assets = _metadata(trainer)
    experiment.log_metrics(trainer.metrics, step=curr_step, epoch=curr_epoch)
    experiment.log_metrics(trainer.lr, step=curr_step, epoch=curr_epoch)
    if curr_epoch == 1:
        experiment.log_metrics(_run.model_info(trainer), step=curr_step, epoch=curr_epoch)
    if save_assets:
        _log_model(experiment, trainer)


def on_train_end(trainer):
    experiment = comet_ml.get_running_experiment()
    if not experiment:
        return
    curr_epoch, curr_step, _ = _metadata(trainer)
    if _run.final_validation_unlogged(trainer, "comet"):
        experiment.log_metrics(_run.final_validation(trainer), step=curr_step, epoch=curr_epoch)
    save_dir = Path(trainer.save_dir)
    _log_model(experiment, trainer)
    if getattr(_run.args(trainer), "plots", True):
        _log_images(experiment, [save_dir / f"{p}{n}.png" for n in EVALUATION_PLOT_NAMES for p in ("Box", "Mask")], None)
        _log_images(experiment, [save_dir / f"{n}.png" for n in ("confusion_matrix", "confusion_matrix_normalized")],
                    None)
        _log_images(experiment, [save_dir / "labels.jpg"], None)
    _log_images(experiment, sorted(save_dir.glob("train_batch*.jpg")), curr_step)
    _log_images(experiment, sorted(save_dir.glob("val_batch*.jpg")), curr_step)
    if (save_dir / "results.csv").exists():
        experiment.log_table(str(save_dir / "results.csv"))
    if (save_dir / "args.yaml").exists():
        experiment.log_asset(save_dir / "args.yaml")
    experiment.end()


def on_teardown(trainer):
    experiment = comet_ml.get_running_experiment()
    if experiment:
        experiment.end()


def callbacks():
    return _run.callback_table(PREFIX, "on_pretrain_routine_start", on_start,
                               on_train_epoch_end=on_train_epoch_end,
                               on_fit_epoch_end=on_fit_epoch_end,
                               on_train_end=on_train_end,
                               teardown=on_teardown)
