"""Hyperparameter evolution, ``YOLO.tune(...)`` and ``lucid tune ...``: the reference's tuner
(ultralytics 8.4.190, engine/tuner.py) rewritten over lucid's trainer. Each trial is one
``lucid train`` process (this interpreter, ``-m lucid_yolo train``); ``concurrent=N`` runs N of them
at once (one GPU can hold several small trials).

As the reference: the same default search space (less ``bgr``, which ``lucid train`` lacks), the
same mutation (parents drawn from the 9 best results weighted by fitness, each gene mutated with
probability 0.5 by a normal step of sigma 0.2 times its gain, shrunk while the best result is stale,
a covariance step from the elite after 30 results, clipped to the bounds and rounded), the same
fitness (the trial's best epoch: mAP50-95 of boxes plus masks), the same files in the tune folder
(``tune_results.ndjson``, ``best_hyperparameters.yaml``, ``weights/`` of the best trial, the plots
when matplotlib is installed) and the trials' folders ``multitrain{N}/{dataset}``, removed unless best.

Where lucid differs: the mutation's random stream is seeded from ``seed=`` and the iteration, so a
tune is reproducible and a resumed tune proposes what an uninterrupted one would (the reference draws
from fresh entropy); ``tune_results.csv`` (fitness then the hyperparameters, the reference's earlier
table) is written beside the NDJSON; with ``concurrent=N`` the N trials of a generation (iterations
1..N, N+1..2N, ...) are mutated from the results of the generations before it, where the strictly
sequential reference mutates every trial from all trials before it (``concurrent=1``, the default,
is the reference's order exactly).

Only numpy and the standard library at import: the mutation is tested against the reference's in
its own environment (tests/oracle/test_tune_mutation_oracle.py).
"""
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

PREFIX = "Tuner: "
FITNESS_METRIC = "metrics/mAP50-95(M)"  # the reference's TASK2METRIC["segment"]
# The reference's integer-only options (cfg CFG_INT_KEYS): rounded to integers when mutated.
INT_KEYS = frozenset({"epochs", "patience", "workers", "seed", "close_mosaic", "mask_ratio", "max_det",
                      "vid_stride", "line_width", "nbs", "save_period", "opset"})
# The reference's default search space, key: (low, high[, gain]), in its order; its bgr (0.0, 1.0)
# is left out: lucid train has no bgr augmentation.
DEFAULT_SPACE = {
    "lr0": (1e-5, 1e-2), "lrf": (0.01, 1.0), "momentum": (0.7, 0.98, 0.3), "weight_decay": (0.0, 0.001),
    "warmup_epochs": (0.0, 5.0), "warmup_momentum": (0.0, 0.95), "box": (1.0, 20.0), "cls": (0.1, 4.0),
    "cls_pw": (0.0, 1.0), "dfl": (0.4, 12.0), "hsv_h": (0.0, 0.1), "hsv_s": (0.0, 0.9), "hsv_v": (0.0, 0.9),
    "degrees": (0.0, 45.0), "translate": (0.0, 0.9), "scale": (0.0, 0.95), "shear": (0.0, 10.0),
    "perspective": (0.0, 0.001), "flipud": (0.0, 1.0), "fliplr": (0.0, 1.0), "mosaic": (0.0, 1.0),
    "mixup": (0.0, 1.0), "cutmix": (0.0, 1.0), "copy_paste": (0.0, 1.0), "close_mosaic": (0.0, 10.0),
}
# Options of the tune itself, never handed to a trial's lucid train.
TUNE_ONLY = ("iterations", "space", "concurrent", "resume", "name", "exist_ok", "use_ray")


# -- the mutation ------------------------------------------------------------------------------------
def constrain(hyp, space):
    """Each value clipped to its bounds: integer options rounded to an integer inside them, the
    others rounded to 5 decimals."""
    out = dict(hyp)
    for k, bounds in space.items():
        if k in INT_KEYS:
            low, high = int(math.ceil(bounds[0])), int(math.floor(bounds[1]))
            if low > high:
                raise ValueError(f"space: '{k}' ({bounds[0]}, {bounds[1]}) holds no integer value")
            out[k] = min(max(round(out[k]), low), high)
        else:
            out[k] = min(max(round(out[k], 5), bounds[0]), bounds[1])
    return out


def mutate(history, space, rng, taken=(), n=9, sigma=0.2):
    """A new point of ``space`` bred from ``history`` (rows [fitness, *values in space order], in
    iteration order), not in history nor in ``taken`` (tuples of values). The random draws are the
    reference's, one for one, so that the same generator gives the reference's proposal."""
    keys = list(space)
    ng = len(keys)
    fitness = np.round(history[:, 0], 5)
    stale = len(history) - 1 - int(np.argmax(fitness))  # results since the best one
    order = np.argsort(-history[:, 0])
    parents = history[order][:n]
    bounds = np.array([space[k][:2] for k in keys], dtype=float)
    span = bounds[:, 1] - bounds[:, 0]
    mutable = span > 0
    if not mutable.any():
        raise ValueError("space: every range is empty (low == high): nothing to mutate")
    unit = np.divide(parents[:, 1:] - bounds[:, 0], span, out=np.zeros_like(parents[:, 1:]), where=mutable)
    weights = parents[:, 0] - parents[:, 0].min() + 1e-6
    if not (np.isfinite(weights).all() and weights.sum()):
        weights = np.ones_like(weights)
    p = weights / weights.sum()
    gains = np.array([space[k][2] if len(space[k]) == 3 else 1.0 for k in keys])
    resolution = np.array([1.0 if k in INT_KEYS else 1e-5 for k in keys])
    decay = 1 - 0.2 * min(stale / 25, 1)
    scale = np.maximum(sigma * decay * gains, np.divide(resolution, span, out=np.zeros(ng), where=mutable))
    seen = {tuple(row[1:]) for row in history} | set(taken)
    covariance, confidence = _elite_covariance(history, order, bounds, span, mutable, scale, decay)
    for attempt in range(200):
        if attempt < 100:
            genes = unit[rng.choice(len(parents), p=p)]
            mask = (rng.random(ng) < 0.5) & mutable
            if covariance is not None and rng.random() < 0.4 * confidence:
                genes = np.where(mask, rng.multivariate_normal(genes, covariance), genes)
                genes = 1 - np.abs(genes % 2 - 1)  # reflected back into [0, 1]
            else:
                genes = np.clip(genes + mask * rng.standard_normal(ng) * scale, 0, 1)
        else:  # the local steps keep landing on known points: every gene drawn afresh
            genes = unit[rng.choice(len(parents), p=p)].copy()
            genes[mutable] = rng.random(mutable.sum())
        hyp = constrain({k: float(bounds[i, 0] + genes[i] * span[i]) for i, k in enumerate(keys)}, space)
        if tuple(hyp.values()) not in seen:
            return hyp
    raise RuntimeError(f"{PREFIX}no new hyperparameters after 200 mutations: the search space is exhausted")


def _elite_covariance(history, order, bounds, span, mutable, scale, decay):
    """From 30 results on: the covariance of the best 20% (at most 30), in unit coordinates, with
    the confidence that weighs it (None, None before that)."""
    if len(history) < 30:
        return None, None
    n_elite = min(int(np.ceil(len(history) * 0.2)), 30)
    confidence = min(n_elite / mutable.sum(), 1)
    elite = np.divide(history[order[:n_elite], 1:] - bounds[:, 0], span,
                      out=np.zeros((n_elite, len(span))), where=mutable)
    covariance = (np.cov(elite, rowvar=False) * decay ** 2 * confidence
                  + np.diag(np.square(scale) / mutable.sum()))
    return covariance, confidence


def propose(records, space, defaults, iteration, seed, taken=()):
    """The hyperparameters of trial ``iteration``: the starting values for the first trial of a
    tune, else a mutation of ``records`` drawn from the stream of (seed, iteration). A trial started
    beside the first one (concurrent=) breeds from the starting values as its only parent."""
    start = constrain({k: defaults[k] for k in space}, space)
    history = history_array(records, space, defaults)
    if history is None:
        if not taken:
            return start
        history = np.array([[0.0, *start.values()]])
    return mutate(history, space, np.random.default_rng([int(seed), int(iteration)]), taken)


def history_array(records, space, defaults):
    """Rows [fitness, *values] of the records in iteration order (None without records); a key a
    record lacks takes its starting value, as the reference's."""
    if not records:
        return None
    rows = [[r.get("fitness", 0.0)] + [r.get("hyperparameters", {}).get(k, defaults[k]) for k in space]
            for r in sorted(records, key=lambda r: r["iteration"])]
    return np.array(rows, dtype=float)


def has_metrics(record, require_all=False):
    failed = set(record.get("failed_datasets", ()))
    trained = [bool(m) and d not in failed for d, m in record.get("datasets", {}).items()]
    return bool(trained) and (all(trained) if require_all else any(trained))


def best_index(records):
    """The best record (records in iteration order): the first of highest fitness among those that
    trained, else among all."""
    fitness = np.array([r.get("fitness", 0.0) for r in records], dtype=float)
    valid = [i for i, r in enumerate(records) if has_metrics(r)]
    return valid[int(fitness[valid].argmax())] if valid else int(fitness.argmax())


# -- the search space and the starting values -------------------------------------------------------
def check_space(space):
    """``space`` as {key: (low, high[, gain])} of numbers, from a dict or a YAML file's path."""
    if isinstance(space, (str, os.PathLike)):
        space = _read_yaml_mapping(space)
    if not isinstance(space, dict) or not space:
        raise ValueError(f"space={space!r}: expected a mapping of option: [low, high] or [low, high, gain]")
    out = {}
    for k, v in space.items():
        if not isinstance(v, (list, tuple)) or len(v) not in (2, 3) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise ValueError(f"space: '{k}': {v!r} is not [low, high] or [low, high, gain] of numbers "
                             f"(lucid mutates numeric options only)")
        if v[0] > v[1]:
            raise ValueError(f"space: '{k}': low {v[0]} is above high {v[1]}")
        out[str(k)] = tuple(float(x) for x in v)
    return out


def _read_yaml_mapping(path):
    try:
        import yaml
    except ImportError as e:
        raise ValueError(f"space={path}: reading a YAML file needs PyYAML (pip install pyyaml), "
                         f"or pass space= as a dict from Python") from e
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise ValueError(f"space={path}: {e.strerror}") from e


def train_defaults():
    """lucid train's options and their defaults as ``lucid train --help`` lists them (the native
    command line in this process, its standard output caught: no second interpreter to start)."""
    import ctypes
    import tempfile

    from . import _lucid

    sys.stdout.flush()
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(1)
        os.dup2(caught.fileno(), 1)
        try:
            _lucid.main(["train", "--help"])
            ctypes.CDLL(None).fflush(None)  # the C++ stream's bytes out of libc's buffer
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        caught.seek(0)
        text = caught.read().decode("utf-8", errors="replace")
    options = dict(re.findall(r"^  ([a-z_0-9]+) \[([^\]]*)\]", text, re.M))
    if not options:
        raise RuntimeError(f"{PREFIX}`lucid train --help` listed no options:\n{text[-2000:]}")
    return options


def starting_values(space, args, options):
    """The first trial's values: the tune's own option where given, else lucid train's default;
    a space key that lucid train lacks is refused by name."""
    out = {}
    for k in space:
        if k not in options:
            why = " (lucid train has no bgr augmentation)" if k == "bgr" else ""
            raise ValueError(f"space: '{k}' is not an option of lucid train{why}")
        value = args.get(k, options[k])
        try:
            out[k] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"space: '{k}' starts from {value!r}, which is not a number") from None
    return out


# -- the trials -------------------------------------------------------------------------------------
def dataset_name(data):
    """The reference's run name of a dataset: the YAML's stem, or its folder's name for a data.yaml."""
    if data is None:
        return "train"
    path = Path(str(data))
    return Path(os.path.abspath(path.parent)).name if path.stem == "data" and path.parent.name else path.stem


def new_folder(parent, name):
    """parent/name, else name-2, name-3, ... (made here, so that concurrent trials never share one)."""
    from .folders import first_free_folder  # here: the module imports only numpy and the standard library

    folder = first_free_folder(parent, name, sep="-", limit=100000)
    if folder is None:
        raise RuntimeError(f"{PREFIX}no free folder name for {parent / name}")
    return folder


def _option_token(k, v):
    if isinstance(v, bool):
        v = "True" if v else "False"
    elif isinstance(v, (list, tuple)):
        v = ",".join(str(x) for x in v)
    return f"{k}={v}"


def trial_metrics(save_dir):
    """The metrics of a finished lucid train run, as the reference reads them from its best.pt: the
    validation of the best epoch (results.csv's metrics/ and val/ columns) and its fitness; None
    when the run left no weights."""
    header = None
    for name in ("best.safetensors", "last.safetensors"):
        header = _checkpoint_record(save_dir / "weights" / name)
        if header is not None:
            break
    if header is None:
        return None
    epoch = int(header.get("best_epoch") or header.get("epoch") or 0)
    metrics = {}
    results = save_dir / "results.csv"
    if results.exists():
        with open(results, newline="", encoding="utf-8") as f:
            rows = [{k.strip(): v for k, v in row.items()} for row in csv.DictReader(f)]
        row = next((r for r in rows if int(float(r.get("epoch", -1))) == epoch), rows[-1] if rows else {})
        metrics = {k: float(v) for k, v in row.items() if k.startswith(("metrics/", "val/")) and v not in ("", None)}
    metrics["fitness"] = float(header.get("best_fitness") or 0.0)
    return metrics


def _checkpoint_record(path):
    """The run record (JSON) in a lucid checkpoint's safetensors header, None without the file."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            meta = json.loads(f.read(size)).get("__metadata__", {})
        return json.loads(meta.get("lucid", "{}"))
    except (OSError, ValueError):
        return None


# -- the tune ---------------------------------------------------------------------------------------
class Tuner:
    """One tune: ``Tuner(args)(iterations)``. ``args`` are ``lucid train``'s options for every
    trial plus the tune's own: space=, concurrent= (trials at once, default 1), resume= (go on in
    project/name, default tune), name=."""

    def __init__(self, args):
        args = {k: v for k, v in args.items() if v is not None}
        if args.pop("use_ray", False):
            raise ValueError("use_ray=True: lucid has no Ray Tune integration; its own tuner runs "
                             "without it (concurrent= runs trials side by side)")
        self.space = check_space(args.pop("space", None) or DEFAULT_SPACE)
        self.concurrent = _positive_int("concurrent", args.pop("concurrent", 1))
        resume = _flag("resume", args.pop("resume", False))
        args.pop("exist_ok", None)  # as the reference: the tune folder is reused only by resume=
        name = str(args.pop("name", None) or "tune")
        data = args.pop("data", None)
        self.datasets = list(data) if isinstance(data, (list, tuple)) else [data]
        self.project = Path(args.pop("project", None) or _runs_dir())
        self.seed = _positive_int("seed", args.get("seed", 0), minimum=0)
        self.defaults = starting_values(self.space, args, train_defaults())
        self.args = args  # each trial's lucid train options, less those the mutation sets
        self.tune_dir = self.project / name if resume else new_folder(self.project, name)
        self.tune_file = self.tune_dir / "tune_results.ndjson"
        self._best_dirs = {}
        print(f"{PREFIX}Initialized Tuner instance with 'tune_dir={self.tune_dir}'", flush=True)

    def __call__(self, iterations=300):
        iterations = _positive_int("iterations", iterations)
        t0 = time.time()
        (self.tune_dir / "weights").mkdir(parents=True, exist_ok=True)
        records = self._load()
        done = {r["iteration"] for r in records}
        pending = [i for i in range(1, iterations + 1) if i not in done]
        if records:
            start = pending[0] if pending else iterations + 1
            print(f"{PREFIX}Resuming tuning run {self.tune_dir} from iteration {start}...", flush=True)
        print(f"{PREFIX}{len(pending)} trials, concurrent={self.concurrent} (one lucid train process each)",
              flush=True)
        self._counts = [0, 0]  # trials run by this call, those that trained
        with ThreadPoolExecutor(self.concurrent) as pool:
            for first in range(1, iterations + 1, self.concurrent):
                block = range(first, min(first + self.concurrent, iterations + 1))
                if all(i in done for i in block):
                    continue
                self._generation(pool, records, block, iterations, t0)
        wall = time.time() - t0
        print(f"{PREFIX}{len(pending)} trials in {wall:.2f}s wall, concurrent={self.concurrent}"
              f" ({wall / max(len(pending), 1):.2f}s per trial)", flush=True)

    def _generation(self, pool, records, block, iterations, t0):
        """Trials block[0].. at once, each mutated from the results of the iterations before the
        block (concurrent=1: every trial from all before it, as the reference), so that a resumed
        generation proposes what it did before its interruption."""
        history = [r for r in records if r["iteration"] < block[0]]
        earlier = {r["iteration"]: tuple(r["hyperparameters"].get(k, self.defaults[k]) for k in self.space)
                   for r in records if r["iteration"] in block}
        jobs = {}
        for i in block:
            taken = [earlier[j] for j in block if j < i]  # the block's earlier proposals: never twice
            if i in earlier:
                continue
            hyp = propose(history, self.space, self.defaults, i, self.seed, taken)
            earlier[i] = tuple(hyp.values())
            print(f"{PREFIX}Starting iteration {i}/{iterations} with hyperparameters: {hyp}", flush=True)
            sweep = new_folder(self.project, "multitrain")  # here: numbered in iteration order
            jobs[pool.submit(self._trial, i, hyp, sweep)] = i
        for job in as_completed(jobs):
            records.append(job.result())
            self._record(records, iterations, t0)

    def _load(self):
        if not self.tune_file.exists():
            return []
        with open(self.tune_file, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def _trial(self, iteration, hyp, sweep):
        """Trains the trial on each dataset in turn (lucid train processes); its record."""
        t0 = time.time()
        datasets, save_dirs, failed = {}, {}, []
        for data in self.datasets:
            run = base = dataset_name(data)
            for n in range(2, 10000):  # two datasets of one name: name, name-2, ...
                if run not in datasets:
                    break
                run = f"{base}-{n}"
            options = {**self.args, **hyp, "data": data, "project": str(sweep), "name": run}
            command = [sys.executable, "-m", "lucid_yolo", "train",
                       *(_option_token(k, v) for k, v in options.items() if v is not None)]
            code = self._run(command, sweep / "train.log")
            metrics = trial_metrics(sweep / run) if code == 0 else None
            if metrics is None:
                failed.append(run)
                print(f"{PREFIX}iteration {iteration}: training on {data} failed (exit {code}), "
                      f"fitness 0{self._log_tail(sweep / 'train.log')}", file=sys.stderr, flush=True)
            datasets[run] = metrics or {FITNESS_METRIC: 0.0, "fitness": 0.0}
            save_dirs[run] = str(sweep / run)
        fitness = sum(m.get("fitness") or 0.0 for m in datasets.values()) / len(datasets)
        with open(sweep / "multitrain_results.json", "w", encoding="utf-8") as f:
            valid = [m for d, m in datasets.items() if d not in failed]
            mean = {k: sum(m[k] for m in valid if k in m) / sum(k in m for m in valid) for k in
                    dict.fromkeys(k for m in valid for k in m)}
            json.dump({"results": {d: (None if d in failed else m) for d, m in datasets.items()},
                       "mean": mean}, f, indent=2)
        record = {"iteration": iteration, "fitness": round(fitness, 5), "hyperparameters": hyp,
                  "datasets": datasets, "save_dirs": save_dirs}
        if failed:
            record["failed_datasets"] = failed
        print(f"{PREFIX}iteration {iteration} trained in {time.time() - t0:.2f}s, fitness={record['fitness']}",
              flush=True)
        return record

    def _run(self, command, log):
        """One lucid train process: its output on this console when trials run one at a time, else
        in the trial's train.log (side by side they would interleave)."""
        if self.concurrent == 1:
            sys.stdout.flush()
            return subprocess.run(command, check=False).returncode
        with open(log, "a", encoding="utf-8") as f:
            return subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, check=False).returncode

    def _log_tail(self, log):
        if self.concurrent == 1 or not log.exists():
            return ""
        return f"; the end of {log}:\n" + log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def _record(self, records, iterations, t0):
        """After each trial: the results files, the best trial's weights kept (the others' folders
        removed, as the reference's cleanup), the plots, best_hyperparameters.yaml."""
        record = records[-1]
        self._counts[0] += 1
        self._counts[1] += has_metrics(record, require_all=True)
        with open(self.tune_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        ordered = sorted(records, key=lambda r: r["iteration"])
        write_csv(self.tune_dir / "tune_results.csv", ordered, self.space, self.defaults)
        best = ordered[best_index(ordered)]
        if best is record:
            for s in self._best_dirs.values():
                if s not in record["save_dirs"].values():
                    shutil.rmtree(s, ignore_errors=True)
            self._copy_weights(record)
            self._best_dirs = record["save_dirs"]
        else:
            for s in record["save_dirs"].values():
                shutil.rmtree(s, ignore_errors=True)
        plot_tune_results(self.tune_file)
        self._summary(ordered, best, iterations, t0)

    def _copy_weights(self, record):
        many = len(record["save_dirs"]) > 1
        for run, folder in record["save_dirs"].items():
            target = self.tune_dir / "weights" / run if many else self.tune_dir / "weights"
            target.mkdir(parents=True, exist_ok=True)
            for file in Path(folder, "weights").glob("*"):
                if file.suffix in (".safetensors", ".pt"):
                    shutil.copy2(file, target)

    def _summary(self, ordered, best, iterations, t0):
        ran, trained = self._counts
        status = ("complete" if trained == ran else "complete (all failed)" if trained == 0
                  else f"complete ({trained}/{ran} succeeded)")
        lines = [f"{len(ordered)}/{iterations} iterations {status} ({time.time() - t0:.2f}s)",
                 f"Results saved to {self.tune_dir}"]
        if has_metrics(best):
            datasets = best.get("datasets", {})
            metrics = (next(iter(datasets.values())) if len(datasets) == 1
                       else {k: round(v.get("fitness") or 0.0, 5) for k, v in datasets.items()})
            where = self.tune_dir / "weights" if len(datasets) == 1 else "not saved for multi-dataset tuning"
            lines += [f"Best fitness={best['fitness']} observed at iteration {best['iteration']}",
                      f"Best fitness metrics are {metrics}", f"Best fitness model is {where}"]
        print("\n" + "\n".join(PREFIX + line for line in lines), flush=True)
        if not has_metrics(best):
            print(f"{PREFIX}No iterations produced training metrics; skipping best_hyperparameters.yaml",
                  file=sys.stderr, flush=True)
            return
        values = {k: best["hyperparameters"].get(k, self.defaults[k]) for k in self.space}
        text = "".join(f"# {line}\n" for line in lines) + "\n" + "".join(
            f"{k}: {_yaml_number(int(v) if k in INT_KEYS else float(v))}\n" for k, v in values.items())
        (self.tune_dir / "best_hyperparameters.yaml").write_text(text, encoding="utf-8")
        print(text, flush=True)


def write_csv(path, ordered, space, defaults):
    """tune_results.csv: fitness, then the hyperparameters in the space's order, a row per trial
    in iteration order."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["fitness", *space])
        for r in ordered:
            w.writerow([r.get("fitness", 0.0), *(r["hyperparameters"].get(k, defaults[k]) for k in space)])


def _yaml_number(v):
    """A number as YAML (PyYAML's safe_dump) writes it: a float keeps a '.' (1e-05 is 1.0e-05)."""
    if isinstance(v, int):
        return str(v)
    text = repr(float(v))
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def plot_tune_results(tune_file):
    """tune_scatter_plots.png (each hyperparameter against fitness, the best marked) and
    tune_fitness.png (fitness by iteration and the best so far) beside the results, when matplotlib
    is installed (it is not a dependency of the package; without it there are no plots)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    with open(tune_file, encoding="utf-8") as f:
        records = sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["iteration"])
    keys = list(records[0].get("hyperparameters", {})) if records else []
    fitness = np.array([r.get("fitness", 0.0) for r in records], dtype=float)
    shown = [i for i, v in enumerate(fitness) if v > 0]  # failed or untrained trials left out
    if not shown:
        return False
    best = max(shown, key=lambda i: fitness[i])
    n = math.ceil(len(keys) ** 0.5)
    plt.figure(figsize=(10, 10), tight_layout=True)
    for j, k in enumerate(keys):
        v = np.array([records[i]["hyperparameters"].get(k, np.nan) for i in shown], dtype=float)
        plt.subplot(n, n, j + 1)
        plt.scatter(v, fitness[shown], c=fitness[shown], cmap="viridis", alpha=0.8, edgecolors="none")
        plt.plot(records[best]["hyperparameters"].get(k, np.nan), fitness[best], "k+", markersize=15)
        plt.title(f"{k} = {records[best]['hyperparameters'].get(k, np.nan):.3g}", fontdict={"size": 9})
        plt.tick_params(axis="both", labelsize=8)
    plt.savefig(Path(tune_file).with_name("tune_scatter_plots.png"), dpi=200)
    plt.close()
    iterations = [records[i]["iteration"] for i in shown]
    plt.figure(figsize=(10, 6), tight_layout=True)
    plt.scatter(iterations, fitness[shown], s=28, color="0.45", label="Iteration")
    plt.plot(iterations, np.maximum.accumulate(fitness[shown]), color="#2563eb", linewidth=2.5, label="Best so far")
    plt.xlabel("Iteration")
    plt.ylabel("Fitness")
    plt.legend()
    plt.savefig(Path(tune_file).with_name("tune_fitness.png"), dpi=200)
    plt.close()
    return True


def _runs_dir():
    from . import _lucid

    return Path(_lucid.settings()["runs_dir"]) / "segment"


def _positive_int(option, value, minimum=1):
    try:
        number = int(str(value))
    except ValueError:
        raise ValueError(f"{option}={value}: expected an integer") from None
    if number < minimum:
        raise ValueError(f"{option}={value}: expected an integer >= {minimum}")
    return number


def _flag(option, value):
    if isinstance(value, bool):
        return value
    if str(value) in ("True", "true", "1"):
        return True
    if str(value) in ("False", "false", "0", "None", ""):
        return False
    raise ValueError(f"{option}={value}: expected True or False")


USAGE = """usage: lucid tune [key=value ...]
  lucid train's options for every trial (data=, model=, epochs=, imgsz=, device=, ...; optimizer=AdamW
  unless given), and the tune's own:
  iterations [300]   trials in all (a resumed tune counts those it has)
  space []           a YAML file of option: [low, high] or [low, high, gain] (default: the reference's
                     search space less bgr)
  concurrent [1]     trials run at once, one lucid train process each; a generation of that many trials
                     is mutated from the results of the generations before it
  seed [0]           the trials' seed and the mutation's (same seed, concurrent=1: the same proposals)
  resume [False]     go on with the tune in project/name (default runs/segment/tune)
  name [tune]        the tune's folder under project (numbered when taken, unless resume)"""


def tune_command(argv):
    """``lucid tune key=value ...``: lucid train's options for every trial plus iterations= (300),
    space= (a YAML file of option: [low, high(, gain)]), concurrent=, resume, name=."""
    if argv[:1] in (["--help"], ["-h"], ["help"]):
        print(USAGE)
        return 0
    args = {}
    for token in argv:
        key, eq, value = token.partition("=")
        if not eq and key != "resume":
            print(f"lucid tune: error: '{token}' is not key=value", file=sys.stderr)
            return 1
        args[key] = value if eq else True
    try:
        iterations = _positive_int("iterations", args.pop("iterations", 300))
        if "space" in args:
            args["space"] = check_space(args["space"])
        args.setdefault("optimizer", "AdamW")  # the reference's model.tune default
        Tuner(args)(iterations)
    except ValueError as e:
        print(f"lucid tune: error: {e}", file=sys.stderr)
        return 1
    return 0
