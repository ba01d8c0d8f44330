"""``to_df()``, ``to_csv()`` and ``to_json()`` of the objects that have a ``summary(normalize,
decimals)`` (Results, SegmentMetrics, ConfusionMatrix), as the reference gives them: to_df() a polars
DataFrame of the summary's rows (polars is needed for it alone); to_csv() and to_json() the text that
polars writes for that frame, produced here with the standard library so that they work without
polars (the same bytes: floats as polars prints them, nested values written by repr in the CSV, where
polars cannot write them)."""
import json
import math

import numpy as np


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _float_text(x):
    """A float as polars writes it: the shortest repr, positional from 1e-6 up to below 1e16, else
    with an unpadded exponent (1e-7, 1e+16)."""
    text = repr(float(x))
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    e = int(exponent)
    if -7 < e < 16:
        return np.format_float_positional(float(x), unique=True, trim="0")
    return f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def _json_text(v):
    v = _plain(v)
    if isinstance(v, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v), ensure_ascii=False)


def _csv_cell(v, nested):
    """One CSV field: None empty; a string quoted (quotes doubled) when it holds the separator, a
    quote or a line break, or is empty, as polars writes it."""
    v = _plain(v)
    if nested:  # every column as its Python text, as the reference does when the frame has nested values
        text = "" if v is None else repr(v) if isinstance(v, (dict, list, tuple, set)) else str(v)
    elif v is None:
        return ""
    elif isinstance(v, bool):
        return "true" if v else "false"
    elif isinstance(v, float):
        return "NaN" if math.isnan(v) else _float_text(v)
    elif isinstance(v, int):
        return str(v)
    else:
        text = str(v)
    if text == "" or any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def rows_to_csv(rows):
    if not rows:
        return "\n"
    columns = list(rows[0])
    nested = any(isinstance(_plain(r.get(c)), (dict, list, tuple, set)) for r in rows for c in columns)
    lines = [",".join(_csv_cell(c, False) for c in columns)]
    lines += [",".join(_csv_cell(r.get(c), nested) for c in columns) for r in rows]
    return "\n".join(lines) + "\n"


def rows_to_json(rows):
    return _json_text(rows)


class ExportMixin:
    """to_df / to_csv / to_json over the class's summary()."""

    def to_df(self, normalize=False, decimals=5):
        """summary() as a polars DataFrame (the reference's to_df; needs `pip install polars`)."""
        try:
            import polars as pl
        except ImportError as e:
            raise ImportError(f"{type(self).__name__}.to_df() returns a polars DataFrame: pip install polars") from e
        return pl.DataFrame(self.summary(normalize=normalize, decimals=decimals))

    def to_csv(self, normalize=False, decimals=5):
        """summary() as CSV text: a header and one line per row."""
        return rows_to_csv(self.summary(normalize=normalize, decimals=decimals))

    def to_json(self, normalize=False, decimals=5):
        """summary() as a JSON list of records."""
        return rows_to_json(self.summary(normalize=normalize, decimals=decimals))
