"""`lucid` after `pip install`: the lucid command line (docs/cli.md), run by the package's native core
in this interpreter; `python -m lucid_yolo ARGS` is the same. Exporters that need Python run in this
interpreter too, unless LUCID_PYTHON names another."""
import os
import sys


def main():
    os.environ.setdefault("LUCID_PYTHON", sys.executable)
    from . import _lucid

    if sys.argv[1:2] == ["track"] or sys.argv[1:3] == ["segment", "track"]:  # a mode of the package (Python)
        from .trackers.cli import track_command

        return track_command(sys.argv[sys.argv.index("track") + 1:])
    sys.stdout.flush()
    return _lucid.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
