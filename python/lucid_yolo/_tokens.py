"""Keyword arguments as the ``key=value`` tokens of the ``lucid`` command: the native option parser
checks them (unknown keys, bad values, ranges) with the same declarations and messages as the CLI."""
from pathlib import PurePath


def value_token(value):
    """The CLI spelling of a Python value: True/False, comma-separated sequences, paths as strings."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (list, tuple)):
        return ",".join(value_token(v) for v in value)
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def tokens(options):
    """``{"epochs": 3, "cos_lr": True}`` -> ``["epochs=3", "cos_lr=True"]``; None means the default
    (the option is left out), as the reference's None values do."""
    return [f"{k}={value_token(v)}" for k, v in options.items() if v is not None]
