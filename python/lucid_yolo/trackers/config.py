"""Tracker YAMLs: the reference's keys (bytetrack.yaml, botsort.yaml ship with the package; a path to
a file of one's own works too). A missing key takes the shipped file's default; an unknown key, a
value of the wrong type or an unknown tracker_type is an error naming it and the file."""
import re
from pathlib import Path
from types import SimpleNamespace

from ..yaml_scalar import scalar

HERE = Path(__file__).resolve().parent
BUILT_IN = ("bytetrack.yaml", "botsort.yaml")

# key: (type, default). Defaults are the reference's (and the shipped files').
KEYS = {
    "tracker_type": (str, "botsort"),
    "track_high_thresh": (float, 0.25),
    "track_low_thresh": (float, 0.1),
    "new_track_thresh": (float, 0.25),
    "track_buffer": (int, 30),
    "match_thresh": (float, 0.8),
    "fuse_score": (bool, True),
    "gmc_method": (str, "sparseOptFlow"),
    "proximity_thresh": (float, 0.5),
    "appearance_thresh": (float, 0.8),
    "with_reid": (bool, False),
    "model": (str, "auto"),
}
TYPES = ("bytetrack", "botsort")


def tracker_path(tracker):
    """The YAML a tracker= value names: a file that exists, else one shipped with the package."""
    path = Path(str(tracker))
    if path.is_file():
        return path
    if path.name in BUILT_IN and (HERE / path.name).is_file():
        return HERE / path.name
    raise FileNotFoundError(f"tracker={tracker}: no such file; lucid ships {' and '.join(BUILT_IN)} (the reference's "
                            f"ocsort, deepocsort, fasttrack and tracktrack are not implemented)")


def _read_yaml(path):
    """The file's mapping: PyYAML where installed (the package does not depend on it), else the flat
    `key: value  # comment` form the tracker files have."""
    text = path.read_text()
    try:
        import yaml
    except ImportError:
        out = {}
        for n, line in enumerate(text.splitlines(), 1):
            line = re.sub(r"\s+#.*$|^#.*$", "", line).strip()
            if not line:
                continue
            key, colon, value = line.partition(":")
            if not colon or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
                raise ValueError(f"{path}:{n}: a tracker YAML holds `key: value` lines, not {line!r}")
            out[key.strip()] = scalar(value.strip())
        return out
    return yaml.safe_load(text)


def _value(key, value, where):
    kind, _ = KEYS[key]
    if key in ("gmc_method", "model") and value is None:
        return "none" if key == "gmc_method" else value
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ValueError(f"{where}: {key}: {value!r} should be {kind.__name__}")
    return value


def load_tracker_config(tracker="botsort.yaml"):
    """The tracker's settings as a namespace (attributes named as the YAML keys)."""
    path = tracker_path(tracker)
    loaded = _read_yaml(path) or {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: a tracker YAML should be a mapping of the keys {', '.join(KEYS)}")
    unknown = [k for k in loaded if k not in KEYS]
    if unknown:
        raise ValueError(f"{path}: unknown tracker key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
    cfg = {k: _value(k, loaded[k], path) if k in loaded else default for k, (_, default) in KEYS.items()}
    if cfg["tracker_type"] not in TYPES:
        raise ValueError(f"{path}: tracker_type: {cfg['tracker_type']!r} is not one of lucid's trackers "
                         f"({', '.join(TYPES)})")
    if "tracker_type" not in loaded:
        raise ValueError(f"{path}: tracker_type is missing ({' or '.join(TYPES)})")
    return SimpleNamespace(**cfg)
