#!/usr/bin/env python3
"""The longest function definitions of the C++ sources under the given folders (default: src), as
lines from the signature's first line to the closing brace, longest first.

    scripts/longest_functions.py [--top N] [--max LINES] [FOLDER ...]

With --max, exits 1 naming every definition longer than LINES (the unit test style.function_length
runs it over src/ with --max 150). A definition is a line at namespace level or in a class body
(indent 0 or 2, as .clang-format lays them out) ending in '{' whose head holds a parameter list and
opens no namespace, class, struct, union, enum or statement, up to the next '}' at its indent; its
signature starts after the previous blank line, ';', '{', '}', ':' or comment."""
import argparse
import re
import sys
from pathlib import Path

NOT_FUNCTIONS = re.compile(r"^(namespace|class|struct|union|enum|extern|template\s*<[^>]*>\s*(class|struct))\b")
STATEMENTS = re.compile(r"^(if|for|while|switch|catch|else|do|try|return)\b")
SIGNATURE_END = re.compile(r"[;{}:]\s*$|^\s*$|^\s*//|^#")


def definitions(path):
    """(lines, place, name) of every definition at namespace level or in a class body (indent 0 or 2)."""
    lines = path.read_text(errors="replace").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("{") and not line.lstrip().startswith("}"):
            start = i
            while start > 0 and not SIGNATURE_END.search(lines[start - 1]):
                start -= 1
            indent = len(lines[start]) - len(lines[start].lstrip(" "))
            head = " ".join(x.strip() for x in lines[start:i + 1])
            before_args = head.split("(")[0]
            if (indent in (0, 2) and "(" in head and not NOT_FUNCTIONS.match(head) and not STATEMENTS.match(head)
                    and (" = " not in before_args or "operator" in before_args)):
                close = " " * indent + "}"
                end = next((k for k in range(i + 1, len(lines)) if lines[k].startswith(close) and
                            len(lines[k]) - len(lines[k].lstrip(" ")) == indent), None)
                if end is None:
                    return
                name = before_args.split()[-1] if before_args.split() else head[:60]
                yield end - start + 1, f"{path}:{start + 1}", name
                i = end + 1
                continue
        i += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", default=["src"])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--max", type=int, default=0)
    args = parser.parse_args()
    found = []
    for folder in args.folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.suffix in (".cpp", ".h", ".cu", ".cuh"):
                found.extend(definitions(path))
    found.sort(key=lambda d: (-d[0], d[1]))
    for n, where, name in found[:args.top]:
        print(f"{n:5d}  {name}  {where}")
    if args.max:
        over = [d for d in found if d[0] > args.max]
        for n, where, name in over:
            print(f"over {args.max} lines: {name} ({n} lines) at {where}", file=sys.stderr)
        sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
