"""`lucid bench pairs` on the CPU (the replay options are accepted there and run natively): one
pair in fresh processes, its replay arm with every stage option and the whole-step recording
(`step`, i.e. capture_step), prints the table, every digest agrees across the arms, the records carry
every field; `merge` joins folders and reports a digest that differs as a failure; a fit that fails
names its log; bad options name the option."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BUILD_DIR = Path(os.environ.get("LUCID_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
LUCID = BUILD_DIR / "lucid"
TRAIN = ["epochs=1", "batch=8", "imgsz=64", "workers=2", "device=cpu"]
HASHES = ["model", "optimizer", "scheduler", "ema", "step_losses", "validation"]
REPORT = ["format", "fit_seconds", "peak_allocated_mib", "peak_reserved_mib", "epochs", "batches", "optimizer_steps",
          "ema_updates", "sha256", "scheduler", "validation", "replay"]


def lucid(env, *args):
    return subprocess.run([LUCID, *args], env=env, capture_output=True, text=True)


def main():
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        env.pop("CUBLAS_WORKSPACE_CONFIG", None)
        out = tmp / "a"
        r = lucid(env, "bench", "pairs", "pairs=1", f"out={out}",
                  "replay=capture_network,capture_segment_heads,capture_optimizer,step", *TRAIN)
        print(r.stdout)
        if r.returncode != 0:
            sys.exit(f"lucid bench pairs failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        check("| Seconds, median (range) | Native | Replay |" in r.stdout, "the seed's table header is printed")
        check(re.search(r"\| Complete fit \| [0-9.]+ \([0-9.]+–[0-9.]+\) \| [0-9.]+ \(", r.stdout) is not None,
              "complete fit row: median (range) for both arms")
        check(re.search(r"\| Whole process \| [0-9.]+ \(", r.stdout) is not None, "whole process row")
        check("| Peak allocated |" in r.stdout and "| Peak reserved |" in r.stdout, "memory rows")
        check(re.search(r"Median complete fit, replay against native: [+-][0-9.]+% time; speed ratio native/replay [0-9.]+x",
                        r.stdout) is not None, "speed ratio")
        check("Every hash matched within and across arms (2 fits): yes" in r.stdout, "hash verdict printed")

        summary = json.loads((out / "summary.json").read_text())
        check(summary["complete_pairs"] == 1 and summary["all_hashes_match"] is True, "summary.json: one pair, all match")
        for k in HASHES:
            h = summary["sha256"][k]
            check(h["across_arms"] and len(h["native"]) == 1 and h["native"] == h["replay"], f"{k} digest equal across arms")
        check((out / "summary.md").read_text().count("| Complete fit |") == 1, "summary.md holds the table")

        fits = summary["fits"]
        check([(f["pair"], f["arm"], f["ran_first"]) for f in fits] == [(1, "native", True), (1, "replay", False)],
              "pair 1 runs native first")
        for f in fits:
            check(0 < f["fit_seconds"] < f["whole_process_seconds"], f"{f['arm']}: complete fit inside whole process")
        for arm in ("native", "replay"):
            run = out / "runs" / f"pair-01-{arm}"
            report = json.loads((run / "fit_report.json").read_text())
            check(all(k in report for k in REPORT) and all(re.fullmatch("[0-9a-f]{64}", report["sha256"][k]) for k in HASHES),
                  f"{arm} fit_report.json has every field and 64-hex digests")
            # The replay component's summary reaches the report (on the CPU: every stage native, with why).
            check((report["replay"] == {}) == (arm == "native"), f"{arm} report's replay summary {'empty' if arm == 'native' else 'filled'}")
            args = (run / "lucid_args.yaml").read_text()  # lucid's own keys
            want = "True" if arm == "replay" else "False"
            check(all(f"{c}: {want}" in args
                      for c in ("capture_network", "capture_segment_heads", "capture_optimizer", "capture_step")),
                  f"{arm} arm trained with capture options {want}")
            if arm == "replay":
                # capture_step on the CPU: every step native with its reason counted, the fit goes on.
                step = report["replay"].get("training_step", {})
                reasons = report["replay"].get("native_reasons", {})
                cpu = "the fit runs on the CPU (recordings are CUDA graphs)"
                check(step.get("replayed_steps") == 0 and step.get("native_steps") == report["batches"]
                      and reasons.get("training step: " + cpu) == report["batches"]
                      and reasons.get("optimizer step and EMA: " + cpu) == report["optimizer_steps"],
                      f"capture_step on the CPU: every step native, counted with its reason ({step}, {reasons})")
            log = (out / f"pair-01-{arm}.log").read_text()
            check("complete fit:" in log, f"{arm} log written")

        # merge: the same folder twice gives two pairs (renumbered), all matching.
        r = lucid(env, "bench", "merge", f"from={out},{out}", f"out={tmp / 'm'}")
        merged = json.loads((tmp / "m" / "summary.json").read_text()) if r.returncode == 0 else {}
        check(r.returncode == 0 and merged.get("complete_pairs") == 2 and "renumbered" in r.stdout, "merge of two folders")

        # A folder whose replay fit computed other model bytes: merge reports it and fails.
        bad = tmp / "b"
        bad.mkdir()
        lines = []
        for line in (out / "pairs.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["arm"] == "replay":
                rec["sha256"]["model"] = "0" * 64
            lines.append(json.dumps(rec))
        (bad / "pairs.jsonl").write_text("\n".join(lines) + "\n")
        r = lucid(env, "bench", "merge", f"from={out},{bad}", f"out={tmp / 'mb'}")
        check(r.returncode != 0 and "fits computed different bytes (model)" in r.stderr, "a differing digest fails the merge")
        check(re.search(r"\| model \| [0-9a-f]{16} \| [0-9a-f]{16} [0-9a-f]{16} \| match \| DIFFER \| DIFFER \|", r.stdout)
              is not None, "the hash table shows the differing model digests")

        # A fit that fails makes the benchmark fail with the fit's log.
        r = lucid(env, "bench", "pairs", "pairs=1", f"out={tmp / 'f'}", f"data={tmp / 'missing.yaml'}", *TRAIN)
        check(r.returncode != 0 and "pair-01-native.log" in r.stderr, "a failing fit names its log")

        # Bad options name the option; nothing runs.
        for args, key in ((["replay=capture_everything"], "replay"), (["project=x"], "project"),
                          (["capture_network=True"], "capture_network"), (["epochs=0"], "epochs"), ([], "out")):
            extra = [] if key == "out" else [f"out={tmp / 'o'}"]
            r = lucid(env, "bench", "pairs", *extra, *args)
            check(r.returncode != 0 and f"option {key}" in r.stderr, f"bad {key}: error names it ({r.stderr.strip()[:90]})")
        check(not (tmp / "o" / "pairs.jsonl").exists(), "no fit ran for bad options")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
