"""The stand-ins' journal: every call, as one JSON line (module, name, args, kwargs), appended to the
file LUCID_STANDIN_LOG names. Values that are not JSON are written as their repr."""
import json
import os


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def record(_module, _name, *args, **kwargs):
    with open(os.environ["LUCID_STANDIN_LOG"], "a") as f:
        f.write(json.dumps({"module": _module, "name": _name, "args": _plain(list(args)), "kwargs": _plain(kwargs)}) +
                "\n")


class Recorder:
    """An object whose every method call is recorded under `module` as `prefix.method`."""

    def __init__(self, module, prefix):
        self._module, self._prefix = module, prefix

    def __getattr__(self, method):
        if method.startswith("__"):
            raise AttributeError(method)

        def call(*args, **kwargs):
            record(self._module, f"{self._prefix}.{method}", *args, **kwargs)

        return call
