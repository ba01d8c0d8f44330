"""The reference documentation's segmentation snippets (docs.ultralytics.com/tasks/segment: train,
val, predict, export; modes/predict: results, streams, sources; usage/callbacks), run with the
installed lucid_yolo package in the working directory the test prepared (coco8-seg.yaml: a
synthetic dataset, yolo26n-seg.pt and path/to/best.pt: the weights of a one-epoch fit with their
class logits raised so that the default conf keeps detections, bus.jpg, image1.jpg, image2.jpg,
path/to/dir, path/to/video.mp4: its images and videos).

What differs from the documentation's text: the import line; epochs=100, imgsz=640 are epochs=2,
imgsz=64 (a CPU test); the modes/predict snippets load "yolo26n-seg.pt" where they load the
detection model "yolo26n.pt"; result.show() (a display) is left out. What each block computed
goes to the JSON file named by argv[1], for the test to compare with `lucid val` and
`lucid predict`."""
import json
import sys

record = {}

# --- tasks/segment: Train ----------------------------------------------------------------------
from lucid_yolo import YOLO

# Load a model
model = YOLO("yolo26n-seg.yaml")  # build a new model from YAML
model = YOLO("yolo26n-seg.pt")  # load a pretrained model (recommended for training)
model = YOLO("yolo26n-seg.yaml").load("yolo26n-seg.pt")  # build from YAML and transfer weights

# --- usage/callbacks (a training callback, added before train) -----------------------------------
epochs_seen = []


def on_train_epoch_end(trainer):
    """Custom logic for additional metrics logging at the end of each training epoch."""
    epochs_seen.append({"epoch": trainer.epoch, "tloss": [float(v) for v in trainer.tloss.values()],
                        "train": trainer.label_loss_items(trainer.tloss, prefix="train"), "lr": trainer.lr})


fit_metrics = []
model.add_callback("on_train_epoch_end", on_train_epoch_end)
model.add_callback("on_fit_epoch_end", lambda trainer: fit_metrics.append(dict(trainer.metrics)))
ended = []
model.add_callback("on_train_end", lambda trainer: ended.append(str(trainer.save_dir)))

# Train the model
results = model.train(data="coco8-seg.yaml", epochs=2, imgsz=64)
record["train"] = {"results_dict": results.results_dict, "save_dir": str(results.save_dir),
                   "epochs_seen": epochs_seen, "fit_metrics": fit_metrics, "ended": ended,
                   "model_after": model.ckpt_path}

# --- tasks/segment: Val ------------------------------------------------------------------------
from lucid_yolo import YOLO

# Load a model
model = YOLO("yolo26n-seg.pt")  # load an official model
model = YOLO("path/to/best.pt")  # load a custom model

# Validate the model
metrics = model.val()  # no arguments needed, dataset and settings remembered
metrics.box.map  # map50-95(B)
metrics.box.map50  # map50(B)
metrics.box.map75  # map75(B)
metrics.box.maps  # a list containing mAP50-95(B) for each category
metrics.seg.map  # map50-95(M)
metrics.seg.map50  # map50(M)
metrics.seg.map75  # map75(M)
metrics.seg.maps  # a list containing mAP50-95(M) for each category
record["val"] = {"box_map": metrics.box.map, "box_map50": metrics.box.map50, "box_map75": metrics.box.map75,
                 "box_maps": metrics.box.maps.tolist(), "seg_map": metrics.seg.map, "seg_map50": metrics.seg.map50,
                 "seg_map75": metrics.seg.map75, "seg_maps": metrics.seg.maps.tolist(),
                 "results_dict": metrics.results_dict, "save_dir": str(metrics.save_dir)}


def detections(result):
    """What the test compares with `lucid predict save_json=True`."""
    n = len(result.boxes)
    return {"path": result.path, "frame": result.frame, "orig_shape": list(result.orig_shape),
            "xyxy": result.boxes.xyxy.tolist(), "xywh": result.boxes.xywh.tolist(),
            "conf": result.boxes.conf.tolist(), "cls": result.boxes.cls.tolist(),
            "mask_areas": result.masks.data.sum((1, 2)).tolist() if n else [],
            "mask_shape": list(result.masks.data.shape) if n else None,
            "xy_points": [len(p) for p in result.masks.xy] if n else []}


# --- tasks/segment: Predict --------------------------------------------------------------------
from lucid_yolo import YOLO

# Load a model
model = YOLO("yolo26n-seg.pt")  # load an official model
model = YOLO("path/to/best.pt")  # load a custom model

# Predict with the model
results = model("https://ultralytics.com/images/bus.jpg")  # predict on an image

# Access the results
for result in results:
    xy = result.masks.xy  # mask in polygon format
    xyn = result.masks.xyn  # normalized
    masks = result.masks.data  # mask in matrix format (num_objects x H x W)
record["predict_bus"] = [detections(r) for r in results]

# --- modes/predict: Return a list with stream=False / a generator with stream=True --------------
from lucid_yolo import YOLO

# Load a model
model = YOLO("yolo26n-seg.pt")  # pretrained YOLO26n model

# Run batched inference on a list of images
results = model(["image1.jpg", "image2.jpg"])  # return a list of Results objects

# Process results list
for result in results:
    boxes = result.boxes  # Boxes object for bounding box outputs
    masks = result.masks  # Masks object for segmentation masks outputs
    keypoints = result.keypoints  # Keypoints object for pose outputs
    probs = result.probs  # Probs object for classification outputs
    obb = result.obb  # Oriented boxes object for OBB outputs
    result.save(filename="result.jpg")  # save to disk
record["predict_list"] = [detections(r) for r in results]

# Run batched inference on a list of images
results = model(["image1.jpg", "image2.jpg"], stream=True)  # return a generator of Results objects

# Process results generator
streamed = []
for result in results:
    boxes = result.boxes  # Boxes object for bounding box outputs
    masks = result.masks  # Masks object for segmentation masks outputs
    keypoints = result.keypoints  # Keypoints object for pose outputs
    probs = result.probs  # Probs object for classification outputs
    obb = result.obb  # Oriented boxes object for OBB outputs
    result.save(filename="result.jpg")  # save to disk
    streamed.append(detections(result))
record["predict_stream"] = streamed

# --- modes/predict: inference sources (a directory, a video) ------------------------------------
from lucid_yolo import YOLO

# Load a pretrained YOLO26n model
model = YOLO("yolo26n-seg.pt")

# Define path to directory containing images and videos for inference
source = "path/to/dir"

# Run inference on the source
results = model(source, stream=True)  # generator of Results objects
record["predict_dir"] = [detections(r) for r in results]

# Define path to video file
source = "path/to/video.mp4"

# Run inference on the source
results = model(source, stream=True)  # generator of Results objects
record["predict_video"] = [detections(r) for r in results]

# --- modes/predict: Working with Results ---------------------------------------------------------
from lucid_yolo import YOLO

# Load a pretrained YOLO26n model
model = YOLO("yolo26n-seg.pt")

# Run inference on an image
results = model("bus.jpg")  # results list

# View results
for r in results:
    print(r.boxes)  # print the Boxes object containing the detection bounding boxes
    print(r.masks)  # print the Masks object containing the detected instance masks
r = results[0]
plotted = r.plot()  # BGR numpy array of the annotated image
record["results_attributes"] = {
    "names": r.names, "orig_shape": list(r.orig_shape), "plot_shape": list(plotted.shape),
    "plot_changed": bool((plotted != r.orig_img).any()), "saved": r.save(),
    "json": json.loads(r.to_json()), "xyxyn": r.boxes.xyxyn.tolist(), "xywhn": r.boxes.xywhn.tolist(),
}

# --- tasks/segment: Export ---------------------------------------------------------------------
from lucid_yolo import YOLO

# Load a model
model = YOLO("yolo26n-seg.pt")  # load an official model
model = YOLO("path/to/best.pt")  # load a custom trained model

# Export the model
record["export"] = model.export(format="onnx")

with open(sys.argv[1], "w") as f:
    json.dump(record, f)
