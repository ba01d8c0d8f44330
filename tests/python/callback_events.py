"""Records the callback events of one tiny train, val, predict and export, in order, with the
package named by argv[2] ("ultralytics": the reference, or "lucid_yolo"), into the JSON file argv[1].
argv[3]: the dataset YAML; argv[4]: the run folder's parent. With lucid_yolo it also records what
a handler on the "lucid_yolo" logger and contextlib.redirect_stdout received."""
import contextlib
import importlib
import io
import json
import logging
import sys
from pathlib import Path

out, package, data, project = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
YOLO = importlib.import_module(package).YOLO
if package == "ultralytics":
    from ultralytics.utils.callbacks.base import default_callbacks as events_by_name
else:
    from lucid_yolo.callbacks import REFERENCE_EVENTS as events_by_name

record = {"events": [], "details": {}}
log_lines = []


class Collect(logging.Handler):
    def emit(self, r):
        log_lines.append(r.getMessage())


def recorder(name):
    def f(obj):
        record["events"].append(name)
        d = record["details"].setdefault(name, {})
        d["type"] = type(obj).__name__
        if name in ("on_train_batch_end", "on_train_epoch_end"):
            d["tloss"] = {k: float(v) for k, v in obj.tloss.items()}
            d["tloss_type"] = type(obj.tloss).__name__
            d["label_loss_items"] = obj.label_loss_items(obj.tloss)
            d["epoch"], d["epochs"] = obj.epoch, obj.epochs
        if name == "on_fit_epoch_end":
            d.setdefault("metrics_keys", []).append(sorted(obj.metrics))
            d.setdefault("epoch", []).append(obj.epoch)
        if name in ("on_train_end", "on_model_save"):
            d["best_name"], d["save_dir_set"] = Path(obj.best).stem, obj.save_dir is not None
        if name == "on_val_end":
            d.setdefault("training", []).append(bool(obj.training))
            d["metrics_type"] = type(obj.metrics).__name__
        if name == "on_predict_batch_end":
            d.setdefault("results", []).append(len(obj.results))
            d["batch_paths"] = len(obj.batch[0])
        if name.startswith("on_export"):
            d["file_set"] = obj.file is not None
    return f


def add_all(model):
    for event in events_by_name:
        model.add_callback(event, recorder(event))


def section(name):
    record[name] = len(record["events"])


common = dict(imgsz=64, device="cpu", workers=0, plots=False)
model = YOLO("yolo26n-seg.yaml")
add_all(model)
logger = logging.getLogger(package)
handler = Collect()
logger.addHandler(handler)
model.train(data=data, epochs=2, batch=2, project=project, name="train", exist_ok=True, amp=False, **common)
logger.removeHandler(handler)
record["log_lines"] = log_lines
section("after_train")
best = sorted((Path(project) / "train" / "weights").glob("best.*"))[0]
model = YOLO(str(best))
add_all(model)
captured = io.StringIO()
with contextlib.redirect_stdout(captured):
    model.val(data=data, batch=2, project=project, name="val", exist_ok=True, **common)
record["redirected"] = captured.getvalue()
section("after_val")
results = model.predict(str(Path(data).parent / "images" / "val"), imgsz=64, device="cpu", save=False)
record["predicted"] = len(results)
section("after_predict")
model.export(format="torchscript" if package == "ultralytics" else "safetensors", imgsz=64)
section("after_export")
Path(out).write_text(json.dumps(record))
