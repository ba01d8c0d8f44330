"""Logging integrations of a training run, as the reference's: ClearML, Comet, DVC (DVCLive), MLflow,
Neptune and Weights & Biases. Each is on when its package is installed and its switch in the
settings file is true (``lucid settings mlflow=False``; the reference's defaults: all on but wandb).
``add_integration_callbacks`` adds the enabled ones' callbacks to a model's callbacks when a training
starts, reading the settings each time, so a settings change between two trainings takes effect."""
import importlib
import sys

# Settings key: (module here, default as the reference's).
INTEGRATIONS = {
    "clearml": ("clearml", True),
    "comet": ("comet", True),
    "dvc": ("dvc", True),
    "mlflow": ("mlflow", True),
    "neptune": ("neptune", True),
    "wandb": ("wb", False),
}


def _settings():
    from .. import _lucid

    return _lucid.settings()


def enabled(settings=None):
    """The settings keys of the integrations switched on (installed or not)."""
    settings = _settings() if settings is None else settings
    return [key for key, (_, default) in INTEGRATIONS.items() if settings.get(key, default) is True]


_CALLBACKS = {}


def integration_callbacks(key):
    """The callbacks of one integration by event name (the same functions each time); empty when its
    package is not installed."""
    if key not in _CALLBACKS:
        module = importlib.import_module(f".{INTEGRATIONS[key][0]}", __name__)
        if not module.available():
            return {}
        _CALLBACKS[key] = module.callbacks()
    return _CALLBACKS[key]


def add_integration_callbacks(callbacks, settings=None):
    """Adds the enabled and installed integrations' callbacks to ``callbacks`` (event name -> list of
    functions), each once. A failure to import an integration's package is a warning, never a failed
    training."""
    for key in enabled(settings):
        try:
            found = integration_callbacks(key)
        except Exception as e:  # a broken install of the package
            print(f"WARNING {key}: not logging this run ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        for event, func in found.items():
            if event in callbacks and func not in callbacks[event]:
                callbacks[event].append(func)
