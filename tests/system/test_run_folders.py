"""Run folders and what resume, val and predict accept (tiny synthetic fit, CPU):
- a resume from a checkpoint other than the run's last (epochN) is refused, naming both ways on,
  and writes nothing;
- resuming a finished run says so (as the reference: "training to N epochs is finished, nothing to
  resume"), exits 1 and writes nothing;
- a checkpoint copied out of its run folder, or into another run's folder, is refused with a message
  naming it and model=, and nothing is written where it lies;
- a second training into a folder another one is writing into (exist_ok=True, or a resume) fails at
  once, naming the folder; the lock goes with its holder, also when that is killed;
- run names that would leave the project (empty, .., ../.., a/b, absolute) are refused;
- checkpoints whose content cannot be right (a tensor missing, renamed or unknown, optimizer state or
  per-group hyperparameters of the wrong shape, NaN or infinite weights, options that are not
  strings) are refused by resume, val and predict with one line naming the file, and so are
  results.csv or step_losses.f32 holding less than the checkpoint by resume."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, synth_data, train  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def lucid(args, env, cwd=None, fault=None):
    e = dict(env, LUCID_FAULT_AT=fault) if fault else env
    return subprocess.run([str(LUCID), *map(str, args)], env=e, cwd=cwd, capture_output=True, text=True)


def tree(folder):
    """Every file under folder with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in Path(folder).rglob("*") if p.is_file()}


def refused(r, *fragments):
    """Exit 1 with one error line holding every fragment and no library internals."""
    lines = r.stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    return (r.returncode == 1 and all(f in last for f in fragments) and
            not any(x in last for x in ("map::at", "json.exception", "out_of_range", "Exception raised from")))


def load(path):
    with safe_open(str(path), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        env.pop("LUCID_FAULT_AT", None)
        data = synth_data(tmp / "data", env, n_train=8, n_val=4, imgsz=64)
        args = [f"data={data}", "epochs=2", "batch=8", "imgsz=64", "workers=1", "device=cpu", "plots=False",
                "save_period=1"]
        project = tmp / "runs"
        train(args, env, project, "r")
        run = project / "r"

        # Finished: nothing to resume, nothing written.
        before = tree(run)
        r = lucid(["train", f"resume={run / 'weights' / 'last.safetensors'}"], env)
        check(refused(r, "last.safetensors", "training to 2 epochs is finished, nothing to resume"),
              f"finished run: {r.stderr.strip()[-300:]}")
        check(tree(run) == before, "finished run: nothing written")
        # An earlier checkpoint of the run (here of a finished one, with more epochs asked for) would
        # train again over the later epochs and overwrite last, best and the logs: refused, naming
        # the run's last and model=.
        for extra in ([], ["epochs=3"]):
            r = lucid(["train", f"resume={run / 'weights' / 'epoch1.safetensors'}", *extra], env)
            check(refused(r, "epoch1.safetensors", "an earlier checkpoint (epoch 1)", "last.safetensors", "model="),
                  f"resume from epoch1 {extra}: {r.stderr.strip()[-300:]}")
            check(tree(run) == before, f"resume from epoch1 {extra}: nothing written")

        # Copied out of its run folder (beside an unrelated results.csv), or into another run's folder.
        elsewhere = tmp / "elsewhere"
        (elsewhere / "copies").mkdir(parents=True)
        (elsewhere / "results.csv").write_text("not lucid's\n")
        shutil.copy(run / "weights" / "epoch1.safetensors", elsewhere / "copies" / "epoch1.safetensors")
        before = tree(elsewhere)
        r = lucid(["train", f"resume={elsewhere / 'copies' / 'epoch1.safetensors'}"], env)
        check(refused(r, "epoch1.safetensors", "not inside its run folder", "model="),
              f"copied checkpoint: {r.stderr.strip()[-300:]}")
        check(tree(elsewhere) == before, "copied checkpoint: nothing written beside it")
        other = project / "other"
        shutil.copytree(run, other)
        args_yaml = (other / "args.yaml").read_text()
        (other / "args.yaml").write_text(args_yaml.replace("seed: 0", "seed: 1"))
        r = lucid(["train", f"resume={other / 'weights' / 'epoch1.safetensors'}"], env)
        check(refused(r, "not inside its run folder", "seed"), f"another run's folder: {r.stderr.strip()[-300:]}")
        (other / "args.yaml").write_text(args_yaml)

        # Run names stay inside the project.
        deep = tmp / "p1" / "p2" / "runs"
        for name in ["", ".", "..", "../..", "a/b", str(tmp / "abs")]:
            r = lucid(["train", *args, f"project={deep}", f"name={name}"], env)
            check(refused(r, f"option name={name}"), f"name={name!r}: {r.stderr.strip()[-200:]}")
        check(not (tmp / "p1").exists() and not (tmp / "abs").exists(), "refused names created no folder")

        # One writer per run folder.
        slow = subprocess.Popen([str(LUCID), "train", *args, "epochs=30", f"project={project}", "name=lk"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (project / "lk" / "args.yaml").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        start = time.monotonic()
        r = lucid(["train", *args, f"project={project}", "name=lk", "exist_ok=True"], env)
        check(refused(r, str(project / "lk"), "another lucid train is writing into this run folder") and
              time.monotonic() - start < 30, f"second writer: {r.stderr.strip()[-300:]}")
        slow.send_signal(signal.SIGKILL)
        slow.wait()
        # The lock went with the killed process: a new writer gets as far as writing args.yaml.
        r = lucid(["train", *args, f"project={project}", "name=lk", "exist_ok=True"], env, fault="args.yaml:after-rename:1")
        check(r.returncode == -9, f"lock released by a killed holder (exit {r.returncode}) {r.stderr.strip()[-200:]}")

        # Checkpoints that cannot be right, in a copy of the run folder each, written as its last
        # (epoch1's content: a run not finished, so resume reads it).
        tensors, meta = load(run / "weights" / "epoch1.safetensors")
        first = lambda prefix: next(k for k in tensors if k.startswith(prefix) and tensors[k].dtype == np.float32)
        cases = {
            "no hyper/lr": ({k: v for k, v in tensors.items() if k != "hyper/lr"}, meta, ["resume"], "hyper/lr"),
            "hyper/momentum short": (dict(tensors, **{"hyper/momentum": tensors["hyper/momentum"][:1]}), meta,
                                     ["resume"], "hyper/momentum"),
            "optimizer state mis-shaped": (dict(tensors, **{first("optim/"): np.zeros(3, np.float32)}), meta,
                                           ["resume"], first("optim/")[len("optim/"):]),
            "unknown tensor": (dict(tensors, **{"grad/model.99.nothing": np.zeros(2, np.float32)}), meta,
                               ["resume"], "grad/model.99.nothing"),
            "renamed model tensor": ({(k + "_x" if k == first("model/") else k): v for k, v in tensors.items()}, meta,
                                     ["resume"], first("model/")[len("model/"):]),
            "NaN model weights": (dict(tensors, **{first("model/"): np.full_like(tensors[first("model/")], np.nan)}),
                                  meta, ["resume"], "NaN or infinite"),
            "inf EMA weights": (dict(tensors, **{first("ema/"): np.full_like(tensors[first("ema/")], np.inf)}), meta,
                                ["resume", "val", "predict"], "NaN or infinite"),
            "renamed EMA tensor": ({(k + "_x" if k == first("ema/") else k): v for k, v in tensors.items()}, meta,
                                   ["resume", "val", "predict"], first("ema/")[len("ema/"):]),
            "option not a string": (tensors, dict(meta, lucid=meta["lucid"].replace('"seed":"0"', '"seed":0')),
                                    ["resume", "val", "predict"], "'seed' is not a string"),
            "negative epoch": (tensors, dict(meta, lucid=meta["lucid"].replace('"epoch":1,', '"epoch":-3,')),
                               ["resume", "val", "predict"], "'epoch' = -3"),
        }
        check('"seed":"0"' in meta["lucid"] and '"epoch":1,' in meta["lucid"], "the checkpoint states seed as a string")
        image = next((data.parent / "images" / "val").iterdir())
        for i, (what, (t, m, commands, fragment)) in enumerate(cases.items()):
            folder = project / f"bad{i}"
            shutil.copytree(run, folder)
            ckpt = folder / "weights" / "last.safetensors"
            save_file(t, str(ckpt), metadata=m)
            for command in commands:
                cmd = {"resume": ["train", f"resume={ckpt}"],
                       "val": ["val", f"model={ckpt}", f"project={tmp / 'v'}"],
                       "predict": ["predict", f"model={ckpt}", f"source={image}", f"project={tmp / 'v'}"]}[command]
                before = tree(folder)
                r = lucid(cmd, env)
                check(refused(r, str(ckpt), fragment) and tree(folder) == before,
                      f"{what}: {command} refused, naming the file and {fragment!r}: {r.stderr.strip()[-300:]}")

        # Logs that hold less than the checkpoint: the run cannot be resumed exactly.
        for i, (log, cut, fragment) in enumerate([("results.csv", lambda b: b.split(b"\n")[0] + b"\n", "holds 0 epochs"),
                                                  ("step_losses.f32", lambda b: b[:8], "holds fewer steps")]):
            folder = project / f"log{i}"
            shutil.copytree(run, folder)
            shutil.copy(folder / "weights" / "epoch1.safetensors", folder / "weights" / "last.safetensors")
            (folder / log).write_bytes(cut((folder / log).read_bytes()))
            before = tree(folder)
            r = lucid(["train", f"resume={folder / 'weights' / 'last.safetensors'}"], env)
            check(refused(r, str(folder / log), fragment) and tree(folder) == before,
                  f"{log} shorter than the checkpoint: {r.stderr.strip()[-300:]}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
