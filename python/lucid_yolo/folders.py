"""Run and trial folders made under a parent: the first free one of name, name{sep}2, name{sep}3, ...,
made by mkdir itself, so that processes or threads choosing at once never share one."""
from pathlib import Path


def first_free_folder(parent, name, sep="", limit=1_000_000):
    """parent/name, else the first of parent/name{sep}2 ... that mkdir makes; None when all exist."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, limit + 1):
        folder = parent / (name if n == 1 else f"{name}{sep}{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    return None
