"""docs/cli.md's table of the reference's keys against the pinned reference and lucid itself: every
key of the reference's cfg/default.yaml has exactly one row and no row names a key the reference
lacks; the section names the pinned version; a key marked `same` or `different` is an option of
some lucid command (`lucid train|val|predict|export --help`) or of a mode of the Python package's
(tracker), a key marked `not yet` of none; a key
marked `same` whose row has no note has the reference's default in every command that has it."""
import re
import subprocess
import sys

import yaml
from oracle_common import BUILD_DIR, SOURCE_DIR

import ultralytics
from ultralytics.cfg import DEFAULT_CFG_PATH

COMMANDS = ["train", "val", "predict", "export"]
# Keys of the Python package's own modes, which the native commands lack: tracker (model.track and the
# console script's `lucid track`, python/lucid_yolo/trackers).
PACKAGE_MODE_KEYS = {"tracker"}


def table_rows():
    text = (SOURCE_DIR / "docs" / "cli.md").read_text()
    section = text.split("## The reference's train, val and predict keys", 1)
    if len(section) != 2:
        sys.exit("docs/cli.md: no section \"The reference's train, val and predict keys\"")
    section = section[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] in ("key", "---") or len(cells) < 4:
            continue
        rows.append(([k.strip() for k in cells[0].split(",")], cells[2], cells[3]))
    return section, rows


def lucid_defaults(command):
    """key -> default as `lucid COMMAND --help` prints it ('options (default in brackets)')."""
    out = subprocess.run([str(BUILD_DIR / "lucid"), command, "--help"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"lucid {command} --help failed ({out.returncode}): {out.stdout}{out.stderr}")
    return {m.group(1): m.group(2) for m in re.finditer(r"^  ([a-z_0-9]+) \[([^\]]*)\]", out.stdout, re.M)}


def same_value(lucid, reference):
    if reference is None:
        return lucid in ("", "None")
    if isinstance(reference, bool):
        return lucid == str(reference)
    if isinstance(reference, (int, float)):
        try:
            return float(lucid) == float(reference)
        except ValueError:
            return False
    return lucid == str(reference)


def main():
    reference = yaml.safe_load(open(DEFAULT_CFG_PATH))
    section, rows = table_rows()
    failures = []
    if f"ultralytics {ultralytics.__version__}" not in section:
        failures.append(f"the section does not name the pinned reference, ultralytics {ultralytics.__version__}")
    seen = {}
    for keys, status, _ in rows:
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
    for k in reference:
        if seen.get(k, 0) != 1:
            failures.append(f"reference key {k}: {seen.get(k, 0)} rows (expected 1)")
    for k in seen:
        if k not in reference:
            failures.append(f"row {k}: not a key of the reference's default.yaml")
    options = {c: lucid_defaults(c) for c in COMMANDS}
    statuses = {}
    for keys, status, notes in rows:
        for k in keys:
            statuses[status] = statuses.get(status, 0) + 1
            where = [c for c in COMMANDS if k in options[c]]
            if status in ("same", "different") and not where and k not in ("task", "mode", *PACKAGE_MODE_KEYS):
                failures.append(f"{k} ({status}): no lucid command has the option")
            if status == "not yet" and where:
                failures.append(f"{k} (not yet): `lucid {' / '.join(where)}` has it; the row is stale")
            if status == "same" and not notes:
                for c in where:
                    if not same_value(options[c][k], reference[k]):
                        failures.append(f"{k} (same, no note): lucid {c} default [{options[c][k]}], "
                                        f"the reference's {reference[k]!r}")
    print(f"{len(reference)} reference keys, {len(rows)} rows; {statuses}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
