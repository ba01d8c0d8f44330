"""`lucid` after `pip install`: the lucid command line (docs/cli.md), run by the package's native core
in this interpreter; `python -m lucid_yolo ARGS` is the same. Exporters that need Python run in this
interpreter too, unless LUCID_PYTHON names another."""
import os
import sys


def main():
    os.environ.setdefault("LUCID_PYTHON", sys.executable)
    from . import _lucid

    sys.stdout.flush()
    return _lucid.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
