"""Run records that stand on their own, and resume that changes a run's length. A tiny fit on the
embedded synthetic dataset (imgsz 64, 2 epochs, every other option defaulted) writes an args.yaml
with every value resolved (none empty, data absolute, device by name) and the same values in its
checkpoint; `resume=... epochs=3`, from another working directory, trains the third epoch on the
schedule recomputed for 3 epochs (results.csv has 3 rows; args.yaml and the checkpoint say 3);
options that cannot change on resume are refused by name without writing; `lucid val` from a third
folder validates with only the run's weights; resuming the finished run says so and writes nothing."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, checkpoint_state, digest, failures, lucid, train  # noqa: E402


def args_yaml(run):
    """args.yaml (the reference's keys) and lucid_args.yaml (lucid's own) as one record, YAML's null
    as the record's None."""
    out = {}
    for name in ("args.yaml", "lucid_args.yaml"):
        for line in (run / name).read_text().splitlines():
            key, _, value = line.partition(": ")
            out[key] = "None" if value == "null" else value
    return out


def snapshot(run):
    return {str(p.relative_to(run)): (p.stat().st_mtime_ns, digest(p)) for p in sorted(run.rglob("*")) if p.is_file()}


def lr_rows(run):
    rows = (run / "results.csv").read_text().splitlines()
    header = rows[0].split(",")
    cols = [i for i, h in enumerate(header) if h.startswith("lr/")]
    return [[float(r.split(",")[i]) for i in cols] for r in rows[1:]]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        first, second, third = (tmp / d for d in ("first", "second", "third"))
        for d in (first, second, third):
            d.mkdir()
        train(["epochs=2", "imgsz=64", "workers=2", "plots=False"], env, "runs", "r", cwd=first)
        run = first / "runs" / "r"
        last = run / "weights" / "last.safetensors"

        args = args_yaml(run)
        empty = [k for k, v in args.items() if v in ("", "''")]
        check(not empty, f"args.yaml has no empty values (empty: {empty})")
        check(args["epochs"] == "2" and args["imgsz"] == "64", "args.yaml: epochs and imgsz as given")
        check(args["batch"] == "8", f"args.yaml: the synthetic dataset's batch resolved ({args['batch']})")
        check(args["device"] in ("cpu", "cuda:0"), f"args.yaml: the resolved device ({args['device']})")
        data = Path(args["data"])
        check(data.is_absolute() and data.is_file() and data.parent.parent == tmp / "cache",
              f"args.yaml: data is the synthetic dataset's absolute path ({data})")
        state = checkpoint_state(last)
        check(all(args[k] == v for k, v in state["train_args"].items()),
              "the checkpoint's record holds args.yaml's values")
        check("capture_step" not in state["train_args"] and "project" not in state["train_args"],
              "the checkpoint's record leaves out execution and location options")

        # Options that cannot change on resume: refused by name, nothing written.
        before = snapshot(run)
        for extra, named in [(["imgsz=96"], "option imgsz=96"), (["lr0=0.02"], "option lr0=0.02"),
                             (["epochs=1"], "has trained 2 epochs already")]:
            r = lucid(["train", f"resume={last}", *extra], env, expect=1)
            check(named in r.stderr, f"resume with {extra}: refused naming it ({r.stderr.strip()[-160:]})")
        check(snapshot(run) == before, "the refused resumes wrote nothing")

        # Extended from another working directory: the third epoch runs on the 3-epoch schedule.
        r = lucid(["train", f"resume={last}", "epochs=3", "imgsz=64"], env, cwd=second)
        check("from epoch 3 of 3" in r.stdout, "the resume continues at epoch 3 of 3")
        rows = lr_rows(run)
        check(len(rows) == 3, f"results.csv has 3 epochs ({len(rows)})")
        check(args_yaml(run)["epochs"] == "3" and checkpoint_state(last)["train_args"]["epochs"] == "3",
              "args.yaml and the checkpoint record epochs=3")
        check(checkpoint_state(last)["epoch"] == 3, "the checkpoint is at epoch 3")
        # optimizer=auto on 3 classes: AdamW at lr 0.002 * 5 / (4 + 3), kept from the run's start; epoch
        # index 2 of 3 (past the warmup of min(3, 3 - 1) epochs) is at lr * lf(2), lf(e) = (1 - e/3) * 0.99 + 0.01.
        chosen = checkpoint_state(last)["optimizer"]
        want = round(0.002 * 5 / 7, 6) * ((1 - 2 / 3) * 0.99 + 0.01)
        check(chosen["name"] == "AdamW" and all(abs(x - want) <= 2e-6 * want for x in rows[2]),
              f"epoch 3's learning rates are the 3-epoch schedule's ({rows[2]} vs {want:.6g}, {chosen})")

        # Validation from a third folder, with nothing but the run's weights.
        r = lucid(["val", f"model={run / 'weights' / 'best.safetensors'}", "project=vals", "plots=False"], env,
                  cwd=third)
        check(str(data) in r.stdout and (third / "vals" / "val").is_dir(),
              f"lucid val from another folder validates on the recorded dataset ({r.stderr.strip()[-200:]})")

        # The finished run: said so, nothing written.
        before = snapshot(run)
        r = lucid(["train", f"resume={last}"], env, expect=1)
        check("training to 3 epochs is finished, nothing to resume" in r.stderr,
              f"resuming the finished run says so ({r.stderr.strip()[-200:]})")
        check(snapshot(run) == before, "resuming the finished run wrote nothing")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
