"""Callbacks and logging of the package against the reference (Ultralytics, this test's Python):
the same tiny fit (2 epochs, 4 synthetic images, batch 2, imgsz 64, CPU), then val, predict (a
folder of 2 images) and export, each with a recorder on every event name (callback_events.py).

- the event sequences are equal, event for event: train (with the validator's events of each
  epoch and of the final validation, on_fit_epoch_end after it, teardown), val, predict, export;
- the objects: trainer.tloss a dict of loss name -> tensor with the reference's keys,
  label_loss_items() keys, trainer.metrics keys at each on_fit_epoch_end (the last without the
  val/ losses), validator.training per validation, the predictor's results per batch;
- logging: a handler on the "lucid_yolo" logger received the training lines, and
  contextlib.redirect_stdout captured val's table, while the process's stdout still shows them.

Intended differences: the objects are lucid's stand-ins (Trainer, Validator, Predictor, Exporter),
not the reference's classes; the export is lucid's safetensors format where the reference's is
torchscript (the events are the same); on_pretrain_routine_start comes once the run folder exists
(after the data and model are read: the native trainer makes the folder), the reference's before."""
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, failures, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_workdir  # noqa: E402

SCRIPT = Path(__file__).resolve().parent / "callback_events.py"
SECTIONS = ["after_train", "after_val", "after_predict", "after_export"]


def run(python, package, tmp, data, env):
    out = tmp / f"{package}.json"
    t = time.time()
    r = subprocess.run([str(python), str(SCRIPT), str(out), package, str(data), str(tmp / package)], env=env,
                       cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{package}: callback_events.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    print(f"{package}: {time.time() - t:.1f} s")
    return json.loads(out.read_text()), r.stdout


def main():
    with package_workdir() as (tmp, env, work):
        data = synth_data(work / "synth", env, 4, 2, 64)
        ref, _ = run(sys.executable, "ultralytics", tmp, data, env)
        got, stdout = run(PACKAGE_PYTHON, "lucid_yolo", tmp, data, env)

        for name in SECTIONS:
            r, g = section(ref, name), section(got, name)
            check(r == g, f"{name[6:]}: the event sequence equals the reference's ({len(g)} events)"
                  + ("" if r == g else f"\n  reference: {r}\n  lucid:     {g}"))
        rd, gd = ref["details"], got["details"]
        for event in ("on_train_batch_end", "on_train_epoch_end"):
            check(gd[event]["tloss_type"] == "dict" and list(gd[event]["tloss"]) == list(rd[event]["tloss"]),
                  f"{event}: trainer.tloss is a dict with the reference's keys {list(rd[event]['tloss'])}")
            check(list(gd[event]["label_loss_items"]) == list(rd[event]["label_loss_items"]),
                  f"{event}: label_loss_items(tloss) has the reference's keys")
        check(gd["on_fit_epoch_end"]["metrics_keys"] == rd["on_fit_epoch_end"]["metrics_keys"]
              and gd["on_fit_epoch_end"]["epoch"] == rd["on_fit_epoch_end"]["epoch"],
              f"on_fit_epoch_end: trainer.metrics keys and epochs {gd['on_fit_epoch_end']['epoch']} as the reference's")
        check(gd["on_val_end"]["training"] == rd["on_val_end"]["training"]
              and gd["on_val_end"]["metrics_type"] == "SegmentMetrics",
              f"on_val_end: validator.training {gd['on_val_end']['training']}, validator.metrics a SegmentMetrics")
        check(gd["on_predict_batch_end"]["results"] == rd["on_predict_batch_end"]["results"],
              f"on_predict_batch_end: predictor.results per batch {gd['on_predict_batch_end']['results']}")
        check(gd["on_train_end"] == {**rd["on_train_end"], "type": "Trainer"}, "on_train_end: trainer.best, save_dir")

        lines = got["log_lines"]
        for want in ("Starting training for 2 epochs", "      Epoch", "Validating ", "Results saved to"):
            check(any(line.startswith(want) for line in lines), f"logging handler on 'lucid_yolo' received {want!r}")
        check(" all " in got["redirected"] and "Box(P" in got["redirected"],
              "contextlib.redirect_stdout captured val's table")
        check("Starting training for 2 epochs" in stdout and "Results saved to" in stdout,
              "the training lines still reach stdout through the default handler")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok")


def section(rec, name):
    """The events recorded in one section (after_train ... after_export: the count at its end)."""
    i = SECTIONS.index(name)
    return rec["events"][rec[SECTIONS[i - 1]] if i else 0:rec[name]]


if __name__ == "__main__":
    main()
