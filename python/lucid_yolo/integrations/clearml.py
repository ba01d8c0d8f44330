"""ClearML: the current task, else a new one (project= else "lucid", task name=, tag "lucid", output
models uploaded) with the run's arguments connected as "General"; per epoch the training losses
("train") and learning rates ("lr") as scalars, the epoch time and validation metrics (titled by
their prefix: metrics, val), the model's size after the first as single values, the mosaic batches
of the first epochs as debug samples; at the end the validation images, the run's plots (not the
batches), the final metrics and fitness as single values, and the best weights as the output model."""
import re
from pathlib import Path

from . import _run

PREFIX = "ClearML"
clearml = None
Task = None


def available():
    global clearml, Task
    try:
        import clearml as module
        from clearml import Task as task_class

        if not hasattr(module, "__version__"):
            return False
        clearml, Task = module, task_class
        return True
    except ImportError:
        return False


def _debug_samples(files, title):
    task = Task.current_task()
    if not task:
        return
    for f in files:
        if f.exists():
            batch = re.search(r"_batch(\d+)", f.name)
            task.get_logger().report_image(title=title, series=f.name.replace(batch.group(), "") if batch else f.name,
                                           local_path=str(f), iteration=int(batch.group(1)) if batch else 0)


def _plot(title, path):
    logger = Task.current_task().get_logger()
    try:
        import matplotlib.image as mpimg
        import matplotlib.pyplot as plt
    except ImportError:  # the image itself where matplotlib is not installed
        logger.report_image(title=title, series="", local_path=str(path), iteration=0)
        return
    fig = plt.figure()
    ax = fig.add_axes([0, 0, 1, 1], frameon=False, aspect="auto", xticks=[], yticks=[])
    ax.imshow(mpimg.imread(path))
    logger.report_matplotlib_figure(title=title, series="", figure=fig, report_interactive=False)
    plt.close(fig)


def on_start(trainer):
    s = _run.state(trainer, "clearml")
    if s.get("tried"):
        return
    s["tried"] = True
    args = _run.args(trainer)
    try:
        task = Task.current_task()
        if not task:
            task = Task.init(project_name=str(getattr(args, "project", None) or "lucid").lstrip("/") or "lucid",
                             task_name=getattr(args, "name", None), tags=["lucid"], output_uri=True,
                             reuse_last_task_id=False, auto_connect_frameworks={"pytorch": False, "matplotlib": False})
        task.connect(vars(args), name="General")
    except Exception as e:
        _run.warn(PREFIX, f"not initialized, not logging this run: {e}")


def on_train_epoch_start(trainer):
    _run.mark_epoch_start(trainer)


def on_train_epoch_end(trainer):
    task = Task.current_task()
    if not task:
        return
    if trainer.epoch == 1:
        _debug_samples(sorted(Path(trainer.save_dir).glob("train_batch*.jpg")), "Mosaic")
    for k, v in _run.losses(trainer).items():
        task.get_logger().report_scalar("train", k, v, iteration=trainer.epoch)
    for k, v in trainer.lr.items():
        task.get_logger().report_scalar("lr", k, v, iteration=trainer.epoch)


def on_fit_epoch_end(trainer):
    task = Task.current_task()
    if not task:
        return
    logger = task.get_logger()
    logger.report_scalar(title="Epoch Time", series="Epoch Time", value=_run.epoch_time(trainer),
                         iteration=_run.epoch(trainer))
    for k, v in trainer.metrics.items():
        logger.report_scalar(k.split("/")[0], k, v, iteration=_run.epoch(trainer))
    if trainer.epoch == 0:
        for k, v in _run.model_info(trainer).items():
            logger.report_single_value(k, v)


def on_train_end(trainer):
    task = Task.current_task()
    if not task:
        return
    save_dir = Path(trainer.save_dir)
    _debug_samples(sorted(save_dir.glob("val*.jpg")), "Validation")
    for f in _run.plots(trainer):
        if "batch" not in f.name:
            _plot(f.stem, f)
    for k, v in _run.final_metrics(trainer).items():
        task.get_logger().report_single_value(k, v)
    if trainer.best is not None and trainer.best.exists():
        task.update_output_model(model_path=str(trainer.best), model_name=getattr(_run.args(trainer), "name", None),
                                 auto_delete_file=False)


def callbacks():
    return _run.callback_table(PREFIX, "on_pretrain_routine_start", on_start,
                               on_train_epoch_start=on_train_epoch_start,
                               on_train_epoch_end=on_train_epoch_end,
                               on_fit_epoch_end=on_fit_epoch_end,
                               on_train_end=on_train_end)
