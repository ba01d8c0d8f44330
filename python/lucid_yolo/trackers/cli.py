"""``lucid track model=... source=... [tracker=botsort.yaml] [predict's options]``: the package's
console script runs tracking in Python (the native ``lucid`` executable has no track command) and
prints each frame's tracks; save=True also writes the annotated video (runs/segment/track*/)."""
import sys

USAGE = ("usage: lucid track model=WEIGHTS source=VIDEO|IMAGES [tracker=botsort.yaml|bytetrack.yaml|FILE.yaml] "
         "[conf=0.1] [save=True] [imgsz=..] [device=..] ...: ByteTrack or BoT-SORT over the predictions "
         "(docs/python.md, Track)")


def _options(args):
    options = {}
    for token in args:
        key, eq, value = token.partition("=")
        if not eq:
            raise ValueError(f"'{token}' is not key=value")
        options[key] = value
    return options


def track_command(args):
    """Runs `lucid track ARGS`; returns the exit code (1 with one error line for a bad option)."""
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    from .. import YOLO

    try:
        options = _options(args)
        model, source = options.pop("model", None), options.pop("source", None)
        if not model or not source:
            raise ValueError(f"model= and source= are required\n{USAGE}")
        options.pop("persist", None)  # one call: the tracker lives through the whole source anyway
        options.pop("stream", None)
        for r in YOLO(model).track(source, stream=True, **options):
            ids = r.boxes.id.int().tolist() if r.boxes is not None and r.boxes.is_track else []
            where = f"{r.path} frame {r.frame}" if r.frame is not None else r.path
            print(f"{where}: {len(ids)} tracks{' (ids ' + ' '.join(map(str, ids)) + ')' if ids else ''}")
    except Exception as e:  # one line, as the native commands' errors
        if type(e).__name__ not in ("LucidError", "ValueError", "FileNotFoundError"):
            raise
        print(f"lucid track: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0
