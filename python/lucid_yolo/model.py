"""``YOLO``: the reference's model object over lucid's commands. Every keyword argument is the
``lucid`` command's option of the same name, parsed and checked by the native option declarations
(docs/cli.md); model= and source= come from the object and the call."""
import contextlib
import os
import queue
import sys
import threading
from pathlib import Path

from . import _lucid
from ._tokens import tokens
from .assets import resolve_dataset, resolve_weights
from .callbacks import (REFERENCE_EVENTS, Exporter, Predictor, Trainer, Validator, default_callbacks, run_callbacks,
                        wanted)
from .integrations import add_integration_callbacks
from .logger import LOGGER, native_output
from .metrics import SegmentMetrics
from .results import Results
from .sources import command_source, memory_source


def _is_yaml(path):
    return str(path).lower().endswith((".yaml", ".yml"))


class YOLO:
    """A segmentation model: a model YAML (trains from scratch), an Ultralytics .pt, lucid weights
    (.safetensors) or a lucid training checkpoint (weights/last.safetensors, best.safetensors)."""

    def __init__(self, model="yolo26n-seg.yaml", task=None, verbose=False):
        if task not in (None, "segment"):
            raise ValueError(f"task={task!r}: lucid trains and runs segmentation models only (task='segment')")
        # A released name (yolo26n-seg.pt ...) absent here: weights_dir's copy, downloaded on first use.
        self.model = resolve_weights(model)
        self.task = "segment"
        self.overrides = {}
        self.callbacks = default_callbacks()
        self.trainer = None
        self.validator = None
        self.predictor = None
        self.metrics = None
        self._pretrained = None
        if self.model.endswith(".torchscript"):
            _load_torchvision_ops()
        self._names, self._imgsz = _lucid.model_names(self.model)

    # -- the model -------------------------------------------------------------------------------
    @property
    def names(self):
        """Class names by id."""
        return dict(enumerate(self._names))

    @property
    def ckpt_path(self):
        return None if _is_yaml(self.model) else self.model

    def load(self, weights):
        """Weights to start training from (the reference's transfer of matching tensors)."""
        self._pretrained = resolve_weights(weights)
        return self

    def info(self, detailed=False, verbose=True, imgsz=640):
        """(layers, parameters, gradients, GFLOPs at imgsz) as ``lucid model info`` counts them; prints
        the reference's summary line when verbose, and lucid's layer table before it when detailed."""
        layers, parameters, gradients, gflops, summary, table = _lucid.model_info(
            [f"model={self.model}", f"imgsz={_square(imgsz)}"])
        if detailed:
            LOGGER.info(table)
        if verbose:
            LOGGER.info(summary)
        return layers, parameters, gradients, gflops

    # -- the modes -------------------------------------------------------------------------------
    def train(self, trainer=None, **kwargs):
        """Trains (``lucid train``); returns the final validation's metrics. ``resume=True`` on a
        model loaded from a checkpoint continues that run."""
        args = {**self.overrides, **kwargs}
        resume = args.pop("resume", None)
        if args.get("save_pt"):  # the pt writer runs in this Python, as export(format="pt") does
            os.environ.setdefault("LUCID_PYTHON", sys.executable)
        if resume is True and self.ckpt_path:
            args["resume"] = self.ckpt_path
        elif resume not in (None, False):
            args["resume"] = resume
        else:
            args["model"] = self.model
            if self._pretrained:
                args.setdefault("pretrained", self._pretrained)
        _resolve_names(args)
        self.trainer = Trainer(args)
        # The logging integrations the settings switch on (MLflow, W&B ...: lucid_yolo/integrations), as
        # the reference adds them to each trainer's callbacks.
        add_integration_callbacks(self.callbacks)
        try:
            with native_output():
                outcome = _lucid.train(tokens(args), self._fit_event, self._wanted)
        finally:
            run_callbacks(self.callbacks, "teardown", self.trainer)  # as the reference's, also after a failure
        if outcome["exit_code"] != 0:
            raise _lucid.LucidError(f"train exited with {outcome['exit_code']}")
        save_dir = Path(outcome["save_dir"])
        best = save_dir / "weights" / "best.safetensors"
        # As the reference: the trained model is the run's best weights from here on.
        self.model = str(best if best.exists() else save_dir / "weights" / "last.safetensors")
        self._names, self._imgsz = _lucid.model_names(self.model)
        self.metrics = SegmentMetrics(outcome["metrics"], outcome["names"], save_dir)
        return self.metrics

    def val(self, validator=None, **kwargs):
        """Validates (``lucid val``) on the model file's dataset unless data= says another."""
        args = {**self.overrides, **kwargs, "model": self.model}
        args.pop("mode", None)
        _resolve_names(args)
        self.validator = Validator(args, names=self._names)
        with native_output():
            outcome = _lucid.val(tokens(args), self._val_event, self._wanted)
        self.metrics = SegmentMetrics(outcome["metrics"], outcome["names"], outcome["save_dir"])
        return self.metrics

    def predict(self, source=None, stream=False, **kwargs):
        """Predicts (``lucid predict``) on an image or video file, a folder, a glob, a list file, images
        in memory (numpy BGR arrays, PIL images, torch tensors: lucid_yolo/sources.py) or a list of
        them; returns a list of Results, or with stream=True a generator yielding each image's (or video
        frame's) Results as it is predicted. Nothing is written unless save=True etc."""
        args = {"save": False, **self.overrides, **kwargs, "model": self.model}
        args.pop("mode", None)
        memory = memory_source(source)
        if memory is None:
            args["source"] = command_source(source)
        else:
            args.pop("source", None)
            if memory[1] is not None:  # a tensor is predicted at its own size, as the reference does
                args["imgsz"] = max(memory[1])
        self.predictor = Predictor(args)
        run = _PredictRun(tokens(args), memory[0] if memory else None, self.callbacks, self.predictor)
        return run.stream() if stream else list(run.stream())

    def __call__(self, source=None, stream=False, **kwargs):
        return self.predict(source, stream=stream, **kwargs)

    def track(self, source=None, stream=False, persist=False, tracker="botsort.yaml", **kwargs):
        """Predicts and tracks objects over a video or frames (ByteTrack or BoT-SORT by the tracker
        YAML: bytetrack.yaml, botsort.yaml or a file's path; lucid_yolo/trackers). Each Results holds
        the tracks: boxes.id, boxes.is_track, (n, 7) boxes.data, the matched masks. persist=True
        keeps the tracker (and its ids) from the previous call, for a loop over frames; conf
        defaults to 0.1 as the reference's. save=True writes the frames drawn with their track ids
        into runs/segment/track*/ (<stem>.avi for a video)."""
        from .trackers.track import TrackSession, track_options

        session = getattr(self, "_track_session", None)
        if not persist or session is None:
            session = self._track_session = TrackSession(tracker)
        options, output = track_options(kwargs)
        frames = self.predict(source, stream=True, **options)
        results = (session(r, persist) for r in frames)
        if output is not None:
            results = output.saved(results)
        return results if stream else list(results)

    def tune(self, use_ray=False, iterations=300, **kwargs):
        """Evolves the training hyperparameters (lucid_yolo/tuner.py, docs/python.md, Tune): each
        trial a ``lucid train`` of this model, ``concurrent=N`` trials at once; writes the tune
        folder (tune_results.ndjson, tune_results.csv, best_hyperparameters.yaml, weights/) and
        returns None, as the reference."""
        from .tuner import Tuner

        args = {**self.overrides, **kwargs, "use_ray": use_ray, "model": self.model}
        if self._pretrained:
            args.setdefault("pretrained", self._pretrained)
        args.setdefault("optimizer", "AdamW")  # the reference's tune default (lr0 is then used)
        args.pop("mode", None)
        data = args.get("data")
        if isinstance(data, (list, tuple)):
            args["data"] = [resolve_dataset(d) for d in data]
        _resolve_names(args)
        Tuner(args)(iterations=iterations)

    def export(self, format="safetensors", **kwargs):
        """Writes the model in one of ``lucid export``'s formats (docs/deploy.md); returns the written
        file's or folder's path."""
        args = {**kwargs, "model": self.model, "format": format}
        args["imgsz"] = _export_imgsz(args.get("imgsz"))
        _resolve_names(args)  # int8 calibration's data=
        suffix = _lucid.export_formats().get(format)  # None: the command refuses the name
        if args.get("out") is None and suffix is not None:
            args["out"] = str(Path(self.model).with_name(Path(self.model).stem + suffix))
        exporter = Exporter(args, self.model)
        run_callbacks(self.callbacks, "on_export_start", exporter)
        with _exporter_python(), native_output():
            _run_command("export", tokens(args))
        exporter.out = args["out"]
        run_callbacks(self.callbacks, "on_export_end", exporter)
        return args["out"]

    def benchmark(self, data=None, imgsz=160, device="cpu", half=False, format="", verbose=False, **kwargs):
        """The reference's benchmark table for the model and each export format whose converter is
        installed (lucid_yolo/benchmark.py); returns its rows as dicts."""
        from .benchmark import benchmark

        return benchmark(self.model, data=data, imgsz=imgsz, device=device, half=half, format=format, verbose=verbose)

    # -- callbacks -------------------------------------------------------------------------------
    def add_callback(self, event, func):
        if event not in self.callbacks:
            raise ValueError(f"unknown callback event {event!r}; events: {', '.join(REFERENCE_EVENTS)}")
        self.callbacks[event].append(func)

    def clear_callback(self, event):
        self.callbacks[event] = []

    def reset_callbacks(self):
        self.callbacks = default_callbacks()

    def _wanted(self):
        return wanted(self.callbacks)

    def _fit_event(self, event):
        """A native trainer or validator event (fit_events.h as a dict) to its callbacks."""
        name = event["event"]
        if name.startswith("on_val_"):
            self.trainer.validator.update(event)
            run_callbacks(self.callbacks, name, self.trainer.validator)
            return
        self.trainer.update(event)
        run_callbacks(self.callbacks, name, self.trainer)

    def _val_event(self, event):
        self.validator.update(event)
        run_callbacks(self.callbacks, event["event"], self.validator)


def _square(imgsz):
    """One size from imgsz=640 or [h, w] (lucid's GFLOPs are counted on a square input: the larger side)."""
    return max(imgsz) if isinstance(imgsz, (list, tuple)) else imgsz


def _resolve_names(args):
    """Released weights and lucid's dataset YAMLs given by name (lucid_yolo/assets.py), in place."""
    for key in ("pretrained", "weights"):
        if isinstance(args.get(key), (str, os.PathLike)):
            args[key] = resolve_weights(args[key])
    if isinstance(args.get("data"), (str, os.PathLike)):
        args["data"] = resolve_dataset(args["data"])


def _export_imgsz(imgsz):
    """The reference's imgsz=[h, w]: lucid exports square inputs, so h == w (one size) or a refusal."""
    if not isinstance(imgsz, (list, tuple)):
        return imgsz
    if len(imgsz) not in (1, 2) or imgsz[0] != imgsz[-1]:
        raise _lucid.LucidError(f"option imgsz={list(imgsz)}: lucid exports square inputs; give one size "
                                f"(imgsz=640) or [h, w] with h == w")
    return imgsz[0]


@contextlib.contextmanager
def _exporter_python():
    """The exporters (scripts/deploy_export.py, ultralytics_weights.py for pt) run with this Python,
    where the package and its export extras are installed, unless LUCID_PYTHON names another (the
    native command's default is the Python the module was built with)."""
    if os.environ.get("LUCID_PYTHON") or not sys.executable:
        yield
        return
    os.environ["LUCID_PYTHON"] = sys.executable
    try:
        yield
    finally:
        os.environ.pop("LUCID_PYTHON", None)


def _run_command(name, args):
    code = _lucid.command(name, args)
    if code != 0:
        raise _lucid.LucidError(f"lucid {name} {' '.join(args)}: exit {code}")


class _PredictRun:
    """The native predict runs on a thread of its own (the GIL released) and hands each image's
    result over a small queue, so a generator yields it while the next one is predicted."""

    _END = object()

    def __init__(self, args, memory=None, callbacks=None, predictor=None):
        self.args = args
        self.memory = memory
        self.callbacks = callbacks or {}
        self.predictor = predictor or Predictor({})
        self.items = queue.Queue(maxsize=2)
        self.cancelled = threading.Event()
        self.save_dir = None

    def _event(self, name):
        self._sink(name)  # in order with the images, to the consumer, which runs the callbacks

    def _sink(self, item):
        while not self.cancelled.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise GeneratorExit("the consumer stopped")  # ends the native loop

    def _work(self):
        try:
            self.save_dir = _lucid.predict(self.args, self._sink, self.memory, self._event)["save_dir"]
            self.items.put(self._END)
        except BaseException as e:  # handed to the consumer, which raises it
            if not self.cancelled.is_set():
                self.items.put(e)

    def stream(self):
        """The Results of each batch, yielded after its on_predict_postprocess_end and
        on_predict_batch_end callbacks, as the reference's predictor yields them; the callbacks run
        here, in the consumer's thread."""
        with native_output():
            worker = threading.Thread(target=self._work, daemon=True)
            worker.start()
            try:
                batch = []
                while True:
                    item = self.items.get()
                    if item is self._END:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    if isinstance(item, str):  # a predictor event
                        if item == "on_predict_batch_end":
                            self.predictor.take_batch(batch)
                            run_callbacks(self.callbacks, "on_predict_postprocess_end", self.predictor)
                            run_callbacks(self.callbacks, item, self.predictor)
                            yield from batch
                            batch = []
                        else:
                            run_callbacks(self.callbacks, item, self.predictor)
                        continue
                    # The run folder as the item says it (None when predict writes nothing)
                    batch.append(Results._native(item, item["save_dir"] or None))
            finally:
                self.cancelled.set()
                worker.join()


def _load_torchvision_ops():
    """torchvision's operators, where it is installed, before a TorchScript file loads: a file
    exported with nms=True calls torchvision::nms, which the native loader otherwise provides itself
    (and torchvision, imported after that, could not register again)."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pass
