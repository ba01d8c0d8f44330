"""`lucid cfg` and `lucid copy-cfg`, as the reference's `yolo cfg` / `yolo copy-cfg`: the default
configuration is one YAML mapping with every option of `lucid train --help` (its defaults; empty
where resolved at run time) and the reference's keys of val, predict and export; lucid's own keys of
those commands are there commented out. copy-cfg writes the same text to default_copy.yaml in the
working folder, and `lucid train cfg=default_copy.yaml` with a few overrides trains (tiny CPU fit)
with the command line winning over the file. Extra words are refused in one line."""
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import Run, check, failures, lucid  # noqa: E402


def help_keys(command, env):
    """(key, default) of each option `lucid COMMAND --help` lists."""
    out = lucid([command, "--help"], env).stdout
    keys = {}
    for line in out.splitlines():
        if line.startswith("  ") and " [" in line:
            key, _, rest = line.strip().partition(" [")
            keys[key] = rest.split("]", 1)[0]
    return keys


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        text = lucid(["cfg"], env).stdout
        cfg = yaml.safe_load(text)
        train = help_keys("train", env)
        missing = [k for k in train if k != "cfg" and k not in cfg]
        check(isinstance(cfg, dict) and not missing, f"lucid cfg holds every train option ({len(train)}); missing {missing}")
        wrong = [k for k, d in train.items() if k in cfg and str(cfg[k] if cfg[k] is not None else "") != d and
                 not (isinstance(cfg[k], bool) and str(cfg[k]) == d) and not (isinstance(cfg[k], float) and
                                                                              float(d) == cfg[k])]
        check(not wrong, f"each train key has its --help default: differing {wrong[:5]}")
        check(all(k in cfg for k in ("source", "conf", "format", "split")),
              "the reference's keys of predict, val and export are there")
        check("# save_frames:" in text or "# out:" in text, "lucid's own keys of the other commands are commented out")

        work = tmp / "work"
        work.mkdir()
        r = lucid(["copy-cfg"], env, cwd=work)
        copy = work / "default_copy.yaml"
        check(copy.is_file() and copy.read_text() == text and "lucid train cfg=" in r.stdout,
              "copy-cfg writes the same text to default_copy.yaml, with an example command")
        lucid(["train", f"cfg={copy}", "epochs=1", "imgsz=64", "batch=4", "workers=2", "device=cpu", "plots=False",
               f"project={tmp / 'runs'}", "name=t"], env, cwd=work)
        args = yaml.safe_load((tmp / "runs" / "t" / "args.yaml").read_text())
        check(args["imgsz"] == 64 and args["epochs"] == 1 and args["lr0"] == cfg["lr0"],
              f"lucid train cfg=default_copy.yaml trains with the overrides: imgsz {args['imgsz']}")
        r = Run(["cfg", "extra"], env)
        check(r.refused("takes no options"), f"lucid cfg extra: {r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
