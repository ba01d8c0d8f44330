"""`lucid` after `pip install`: the lucid command line (docs/cli.md), run by the package's native core
in this interpreter; `python -m lucid_yolo ARGS` is the same. Exporters that need Python run in this
interpreter too, unless LUCID_PYTHON names another. Released weights and lucid's dataset YAMLs given by
name (model=yolo26n-seg.pt, data=coco8-seg.yaml) are resolved, downloaded on first use, before the
command line is handed over (lucid_yolo/assets.py)."""
import os
import sys

WEIGHTS_KEYS = ("model", "pretrained", "weights")


def resolve_tokens(args):
    """The command line with each released weights name and shipped dataset name replaced by its file."""
    from .assets import resolve_dataset, resolve_weights

    if args[:1] == ["settings"]:  # its key=value tokens are settings, never files to fetch
        return list(args)
    out = []
    for token in args:
        key, eq, value = token.partition("=")
        if eq and key in WEIGHTS_KEYS:
            token = f"{key}={resolve_weights(value)}"
        elif eq and key == "data":
            token = f"{key}={resolve_dataset(value)}"
        out.append(token)
    return out


def main():
    os.environ.setdefault("LUCID_PYTHON", sys.executable)
    from . import _lucid

    args = sys.argv[1:]
    try:
        args = resolve_tokens(args)
    except _lucid.LucidError as e:  # one line, as the native command's errors (exit 1)
        command = f"lucid {args[0]}" if args and "=" not in args[0] else "lucid"
        print(f"{command}: error: {e}", file=sys.stderr)
        return 1
    if args[0:1] == ["track"] or args[0:2] == ["segment", "track"]:  # a mode of the package (Python)
        from .trackers.cli import track_command

        return track_command(args[args.index("track") + 1:])
    if args[0:1] == ["tune"] or args[0:2] == ["segment", "tune"]:  # a mode of the package (Python)
        from .tuner import tune_command

        return tune_command(args[args.index("tune") + 1:])
    if args[0:1] == ["benchmark"] or args[0:2] == ["segment", "benchmark"]:  # a mode of the package (Python)
        from .benchmark import benchmark_command

        return benchmark_command(args[args.index("benchmark") + 1:])
    sys.stdout.flush()
    return _lucid.main(args)


if __name__ == "__main__":
    sys.exit(main())
