"""MLflow: the run's arguments as params at its start, the learning rates and training losses after
each epoch's steps and the validation's metrics after each validation (step = the 0-based epoch,
parentheses dropped from the keys as MLflow requires), and at the end the weights folder and the run
folder's plots, results.csv and YAMLs as artifacts. MLFLOW_TRACKING_URI (else MLflow's default
store), MLFLOW_EXPERIMENT_NAME (else project=, else /Shared/lucid), MLFLOW_RUN (else name=) and
MLFLOW_KEEP_RUN_ACTIVE are honoured; a run the user started already is logged into and left open."""
import os
from pathlib import Path

from . import _run

PREFIX = "MLflow"
ARTIFACT_SUFFIXES = {".png", ".jpg", ".csv", ".pt", ".yaml"}
mlflow = None


def available():
    global mlflow
    try:
        import mlflow as module

        if not hasattr(module, "__version__"):  # a folder named mlflow, not the package
            return False
        mlflow = module
        return True
    except ImportError:
        return False


def _keep_active():
    return os.environ.get("MLFLOW_KEEP_RUN_ACTIVE", "").strip().lower() in ("1", "true", "yes", "on", "y", "t")


def _sanitize(values):
    return {k.replace("(", "").replace(")", ""): float(v) for k, v in values.items()}


def _start(trainer):
    s = _run.state(trainer, "mlflow")
    if s.get("tried"):
        return
    s["tried"] = True
    args = _run.args(trainer)
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or getattr(args, "project", None) or "/Shared/lucid"
    run_name = os.environ.get("MLFLOW_RUN") or getattr(args, "name", None)
    try:
        mlflow.set_experiment(str(experiment))
        mlflow.autolog()
        active = mlflow.active_run()
        if active is None:
            active = mlflow.start_run(run_name=run_name)
            s["started"] = True
        print(f"{PREFIX}: logging run_id({active.info.run_id}) to {mlflow.get_tracking_uri()}; "
              f"disable with 'lucid settings mlflow=False'")
        mlflow.log_params(vars(args))
        s["active"] = True
    except Exception as e:
        _run.warn(PREFIX, f"failed to initialize, not tracking this run: {e}")
        _end(trainer, "FAILED")


def _log(trainer, metrics):
    s = _run.state(trainer, "mlflow")
    if not s.get("active"):
        return
    try:
        mlflow.log_metrics(metrics=metrics, step=_run.epoch(trainer))
    except Exception as e:
        _run.warn(PREFIX, f"metric logging failed, not tracking the rest of this run: {e}")
        s["active"] = False


def on_start(trainer):
    _start(trainer)


def on_train_epoch_end(trainer):
    _log(trainer, {**_sanitize(trainer.lr), **_sanitize(_run.losses(trainer))})


def on_fit_epoch_end(trainer):
    _run.note_fit_epoch_end(trainer, "mlflow")
    _log(trainer, _sanitize(trainer.metrics))


def on_train_end(trainer):
    s = _run.state(trainer, "mlflow")
    # The reference logs the final validation (of the best weights) as a last on_fit_epoch_end of the
    # last epoch; where the fit raised none for it, its metrics are logged here the same way.
    if _run.final_validation_unlogged(trainer, "mlflow"):
        _log(trainer, _sanitize(_run.final_validation(trainer)))
    if s.get("active"):
        try:
            mlflow.log_artifact(str(trainer.wdir))  # the weights folder: best and last
            for f in sorted(Path(trainer.save_dir).glob("*")):
                if f.suffix in ARTIFACT_SUFFIXES:
                    mlflow.log_artifact(str(f))
            print(f"{PREFIX}: results logged to {mlflow.get_tracking_uri()}")
        except Exception as e:
            _run.warn(PREFIX, f"failed to log artifacts: {e}")
    _end(trainer, "FINISHED")


def on_teardown(trainer):
    _end(trainer, "FAILED")


def _end(trainer, status):
    s = _run.state(trainer, "mlflow")
    s["active"] = False
    if not s.pop("started", False):  # only a run this integration started is ended
        return
    if _keep_active():
        print(f"{PREFIX}: the run is still active; end it with mlflow.end_run()")
        return
    try:
        mlflow.end_run(status=status)
    except Exception:
        pass


def callbacks():
    return _run.callback_table(PREFIX, "on_pretrain_routine_end", on_start,
                               on_train_epoch_end=on_train_epoch_end,
                               on_fit_epoch_end=on_fit_epoch_end,
                               on_train_end=on_train_end,
                               teardown=on_teardown)
