"""The package's tune (lucid_yolo/tuner.py) on tiny synthetic data (1 epoch, imgsz 64, CPU):
- `lucid tune iterations=3 seed=1`: the reference's files and keys (tune_results.ndjson records and
  their keys, the hyperparameters of the reference's default search space in its order less bgr,
  tune_results.csv, best_hyperparameters.yaml equal to the best record, weights/), the first trial at
  the reference's default values, every value inside its bounds, each later trial differing from one
  earlier trial in some keys but not all (only the mutated genes change), the trials' folders
  multitrain, multitrain-2, ... with only the best trial's run kept;
- YOLO.tune(iterations=2, seed=1), then `lucid tune resume iterations=3` in its folder: the count
  going on from 3, and the same hyperparameters as the uninterrupted tune (same seed: reproducible);
- `lucid tune concurrent=2 seed=2`: 3 trials in 2 generations, a valid best_hyperparameters.yaml, the
  trials' output in train.log, other proposals than seed 1's; its first generation's second trial
  dropped from the results and resumed: the same proposal again;
- a space key lucid train lacks (bgr) and concurrent=0 refused, naming them."""
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, failures  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402

TRIAL = ["epochs=1", "imgsz=64", "batch=8", "device=cpu", "workers=2", "plots=False"]


def reference_space_and_defaults():
    """The reference's default search space and its default values (ultralytics' own Tuner and cfg)."""
    from ultralytics.cfg import get_cfg
    from ultralytics.engine.tuner import Tuner

    with tempfile.TemporaryDirectory() as tmp:
        space = Tuner(args={"model": "yolo26n-seg.yaml", "project": tmp}, model=object()).space
    cfg = get_cfg()
    return space, {k: getattr(cfg, k) for k in space}


def read_tune(folder):
    lines = (folder / "tune_results.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def read_yaml(path):
    import yaml

    return yaml.safe_load(path.read_text())


def check_files(tune, space, defaults):
    records = read_tune(tune)
    keys = [k for k in space if k != "bgr"]
    check([r["iteration"] for r in records] == [1, 2, 3], f"3 records, iterations 1..3 ({len(records)})")
    check(all(list(r)[:5] == ["iteration", "fitness", "hyperparameters", "datasets", "save_dirs"] for r in records),
          "each record holds the reference's keys in its order")
    check(all(list(r["hyperparameters"]) == keys for r in records),
          "the hyperparameters: the reference's default search space in its order, less bgr")
    check(all({"metrics/mAP50-95(M)", "metrics/mAP50-95(B)", "fitness"} <= set(m) for r in records
              for m in r["datasets"].values()), "each dataset's metrics hold the mAP50-95 of boxes and masks and fitness")
    check(records[0]["hyperparameters"] == {k: defaults[k] for k in keys},
          "the first trial runs the reference's default values")
    inside = all(space[k][0] <= r["hyperparameters"][k] <= space[k][1] for r in records for k in keys)
    check(inside, "every value inside its bounds")
    check(all(isinstance(r["hyperparameters"]["close_mosaic"], int) for r in records), "close_mosaic an integer")
    for j, r in enumerate(records[1:], 1):
        changed = [sum(r["hyperparameters"][k] != p["hyperparameters"][k] for k in keys) for p in records[:j]]
        check(any(0 < c < len(keys) for c in changed),
              f"iteration {j + 1} differs from a parent in some keys, not all ({changed} of {len(keys)})")
    with open(tune / "tune_results.csv", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == ["fitness", *keys] and len(rows) == 4 and all(
        [float(x) for x in row] == [rec["fitness"], *rec["hyperparameters"].values()]
        for row, rec in zip(rows[1:], records)), "tune_results.csv: fitness then the hyperparameters, as the records")
    return records


def check_best(tune, records):
    best = max(records, key=lambda r: (r["fitness"], -r["iteration"]))
    path = tune / "best_hyperparameters.yaml"
    text = path.read_text() if path.exists() else ""
    check(text.startswith("# ") and read_yaml(path) == best["hyperparameters"],
          f"best_hyperparameters.yaml: the header, then iteration {best['iteration']}'s values")
    check((tune / "weights" / "best.safetensors").is_file(), "the best trial's weights in tune/weights")
    kept = [Path(d) for r in records for d in r["save_dirs"].values() if Path(d).is_dir()]
    check(kept == [Path(d) for d in best["save_dirs"].values()],
          f"only the best trial's run folder is kept ({[str(k) for k in kept]})")


def main():
    require_package()
    space, defaults = reference_space_and_defaults()
    script = PACKAGE_PYTHON.parent / "lucid"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        # The package's own `lucid data synth` (the build's executable may be mid-rebuild).
        subprocess.run([str(script), "data", "synth", f"out={tmp / 'synth'}", "n_train=16", "n_val=8", "imgsz=64"],
                       env=env, check=True, capture_output=True)
        data = tmp / "synth" / "data.yaml"

        def run(*args):
            t0 = time.time()
            r = subprocess.run([str(a) for a in args], env=env, capture_output=True, text=True, cwd=tmp)
            print(f"  ({time.time() - t0:.1f} s) {' '.join(map(str, args[1:4]))} ...", flush=True)
            if r.returncode != 0:
                print(r.stdout[-3000:], r.stderr[-3000:])
            return r

        options = ", ".join(f"{t.split('=')[0]}={t.split('=')[1]!r}" for t in TRIAL)
        code = (f"from lucid_yolo import YOLO; YOLO('yolo26n-seg.yaml').tune(data={str(data)!r}, iterations=2, "
                f"seed=1, project={str(tmp / 'a')!r}, {options})")
        r = run(PACKAGE_PYTHON, "-c", code)
        check(r.returncode == 0 and len(read_tune(tmp / "a" / "tune")) == 2, "YOLO.tune(iterations=2) runs 2 trials")

        cli = [script, "tune", f"data={data}", "seed=1", *TRIAL]
        r = run(*cli, f"project={tmp / 'b'}", "iterations=3")
        check(r.returncode == 0, "lucid tune iterations=3 runs")
        check(sorted(p.name for p in (tmp / "b").iterdir()) == ["multitrain", "multitrain-2", "multitrain-3", "tune"],
              "the tune folder and one multitrain folder per trial")
        b = check_files(tmp / "b" / "tune", space, defaults)
        check_best(tmp / "b" / "tune", b)

        r = run(*cli, f"project={tmp / 'a'}", "iterations=3", "resume")
        a = read_tune(tmp / "a" / "tune")
        check(r.returncode == 0 and "from iteration 3" in r.stdout and [x["iteration"] for x in a] == [1, 2, 3]
              and not (tmp / "a" / "tune-2").exists(), "lucid tune resume goes on in its folder from iteration 3")
        check([x["hyperparameters"] for x in a] == [x["hyperparameters"] for x in b],
              "the same seed gives the same hyperparameters (Python or CLI, resumed or not)")

        r = run(script, "tune", f"data={data}", "seed=2", f"project={tmp / 'c'}", "iterations=3", "concurrent=2", *TRIAL)
        c = read_tune(tmp / "c" / "tune") if r.returncode == 0 else []
        check(r.returncode == 0 and sorted(x["iteration"] for x in c) == [1, 2, 3] and "concurrent=2" in r.stdout,
              "concurrent=2: 3 trials")
        check(all((tmp / "c" / m / "train.log").is_file() for m in ("multitrain", "multitrain-2", "multitrain-3")),
              "concurrent trials write their output to train.log")
        if c:
            best = read_yaml(tmp / "c" / "tune" / "best_hyperparameters.yaml")
            check(list(best) == list(c[0]["hyperparameters"])
                  and all(space[k][0] <= v <= space[k][1] for k, v in best.items()),
                  "concurrent=2: best_hyperparameters.yaml holds every key, inside its bounds")
            check(sorted(c, key=lambda x: x["iteration"])[1]["hyperparameters"] != b[1]["hyperparameters"],
                  "another seed proposes other hyperparameters")
            # A generation interrupted after one of its two trials: resumed, the other trial gets
            # the proposal it had.
            lost = next(x for x in c if x["iteration"] == 2)
            (tmp / "c" / "tune" / "tune_results.ndjson").write_text(
                "".join(json.dumps(x) + "\n" for x in c if x is not lost))
            r = run(script, "tune", f"data={data}", "seed=2", f"project={tmp / 'c'}", "iterations=3", "concurrent=2",
                    "resume", *TRIAL)
            again = {x["iteration"]: x for x in read_tune(tmp / "c" / "tune")}
            check(r.returncode == 0 and sorted(again) == [1, 2, 3]
                  and again[2]["hyperparameters"] == lost["hyperparameters"],
                  "concurrent=2 resumed within a generation: the lost trial runs again with its proposal")

        (tmp / "space.yaml").write_text("lr0: [0.001, 0.01]\nbgr: [0.0, 1.0]\n")
        r = run(script, "tune", f"space={tmp / 'space.yaml'}", f"project={tmp / 'd'}")
        check(r.returncode == 1 and "'bgr' is not an option of lucid train" in r.stderr, "a space key lucid lacks is refused")
        r = run(script, "tune", "concurrent=0", f"project={tmp / 'd'}")
        check(r.returncode == 1 and "concurrent=0" in r.stderr, "concurrent=0 is refused, naming it")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
