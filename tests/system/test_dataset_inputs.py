"""Dataset inputs that are special files or out of bounds (docs/reliability.md, "Datasets: special
files and sizes"), as a user meets them with `lucid data check` and `lucid train`: a split list file
or COCO JSON that is a device node copy or a fifo, labels that are fifos, folders or symlink loops,
`train: /proc`, a label file of 10^5 polygons and a COCO file of many annotations. Every command
runs with a timeout and, where the defect was a runaway allocation, under `ulimit -v` with its peak
RSS asserted, so that against a binary from before the fixes a hang or a runaway fails a check
rather than blocking the test. Device node copies need root (mknod in a temporary folder; the real
/dev is never touched); without root those checks are skipped and said to be."""
import json
import os
import stat
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
import lucid_runs  # noqa: E402
from lucid_runs import LUCID, check, failures, synth_data  # noqa: E402

TIMEOUT = 60
CAP = 4 << 30  # ulimit -v for the runs whose defect was a runaway allocation
ROOT = os.geteuid() == 0


class Run(lucid_runs.Run):
    """A lucid command under ulimit -v CAP unless cap= says otherwise."""

    def __init__(self, args, env, cap=CAP, timeout=TIMEOUT):
        super().__init__(args, env, cap=cap, timeout=timeout)


def write_yaml(path, train, names="[a, b, c]"):
    path.write_text(f"path: {path.parent}\ntrain: {train}\nval: {train}\nnames: {names}\n")
    return path


def split_sources(tmp, env):
    """`train:` naming a device node copy, a fifo, or a COCO JSON that is one; and `train: /proc`."""
    tmp = tmp / "sources"
    tmp.mkdir()
    fifo = tmp / "list.txt"
    os.mkfifo(fifo)
    r = Run(["data", "check", f"data={write_yaml(tmp / 'fifo.yaml', 'list.txt')}"], env)
    check(r.refused("split 'train': list file", "is a fifo"), f"5 a split list file that is a fifo: {r}")
    r = Run(["train", f"data={tmp / 'fifo.yaml'}", "epochs=1", "imgsz=64", "device=cpu", f"project={tmp / 'p'}"], env)
    check(r.refused("is a fifo"), f"5 train with a split list file that is a fifo: {r}")
    json_fifo = tmp / "ann.json"
    os.mkfifo(json_fifo)
    (tmp / "coco_fifo.yaml").write_text(f"path: {tmp}\ntrain:\n  json: ann.json\n  images: .\n")
    r = Run(["data", "check", f"data={tmp / 'coco_fifo.yaml'}"], env)
    check(r.refused("ann.json: is a fifo"), f"5 a COCO json: that is a fifo: {r}")
    r = Run(["data", "check", f"data={write_yaml(tmp / 'proc.yaml', '/proc')}"], env, timeout=30)
    check(r.refused("split 'train': /proc is on the proc pseudo file system"), f"8 train: /proc: {r}")
    if not ROOT:
        print("skip 5 device node copies as a split and as a COCO json: mknod needs root", flush=True)
        return
    os.mknod(tmp / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    os.mknod(tmp / "zero.json", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    r = Run(["data", "check", f"data={write_yaml(tmp / 'zero.yaml', 'zero')}"], env)
    check(r.refused("list file", "zero: is a character device") and r.peak < 1 << 30,
          f"5 train: a copy of /dev/zero: {r}")
    (tmp / "coco_zero.yaml").write_text(f"path: {tmp}\ntrain:\n  json: zero.json\n  images: .\n")
    r = Run(["data", "check", f"data={tmp / 'coco_zero.yaml'}"], env)
    check(r.refused("zero.json: is a character device") and r.peak < 1 << 30, f"5 json: a copy of /dev/zero: {r}")


def labels_that_are_not_files(tmp, env, data):
    """Labels that are a fifo, a folder, a symlink loop: each image skipped with a warning."""
    labels = sorted((data.parent / "labels" / "train").glob("*.txt"))
    made = {}
    for label, (kind, make) in zip(labels, [("a fifo", os.mkfifo), ("a folder", os.mkdir),
                                           ("a symlink loop", lambda p: os.symlink(p.name, p))]):
        label.unlink()
        make(label)
        made[label] = kind
    r = Run(["data", "check", f"data={data}"], env)
    for label, kind in made.items():
        check(not r.timed_out and f"{label}: label file is {kind}" in r.stdout and "image skipped" in r.stdout,
              f"5 a label that is {kind} is reported: {r}")
    check(f"{len(made)} skipped files" in r.stdout, f"5 the images of those labels are counted as skipped: {r}")
    for label in made:
        if label.is_dir() and not label.is_symlink():
            label.rmdir()
        else:
            label.unlink()


def dense_labels(tmp, env, data):
    """One label file of 10^5 polygons (7.1 GB and 119 s in train before): refused for its image."""
    label = sorted((data.parent / "labels" / "train").glob("*.txt"))[0]
    label.write_text("0 0.1 0.1 0.2 0.1 0.2 0.2 0.1 0.2\n" * 100000)
    r = Run(["data", "check", f"data={data}"], env)
    check(not r.timed_out and f"{label}: 100000 label rows (instances), more than the 5000" in r.stdout and
          r.peak < 1 << 30, f"6 data check of a 10^5-instance label file: {r}")
    r = Run(["train", f"data={data}", "model=yolo26n-seg.yaml", "epochs=1", "imgsz=64", "batch=4", "workers=0",
             "device=cpu", "plots=False", f"project={tmp / 'dense'}"], env, timeout=300)
    check(r.code == 0 and "100000 label rows (instances)" in r.stderr and r.peak < 3 << 30,
          f"6 train with a 10^5-instance label file: {r}")


def coco_speed(tmp, env):
    """200,000 annotations (a million took over 300 s): data check within 20 s."""
    tmp = tmp / "coco"
    tmp.mkdir()
    images = [{"id": i + 1, "file_name": f"{i}.jpg", "width": 32, "height": 32} for i in range(1000)]
    annotations = [{"id": k + 1, "image_id": k % 1000 + 1, "category_id": 1, "bbox": [k % 20, 1, 4, 4],
                    "segmentation": [[1, 1, 5, 1, 5, 5]], "area": 8, "iscrowd": 0} for k in range(200000)]
    (tmp / "instances_train.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "a"}]}))
    r = Run(["data", "check", f"data={tmp / 'instances_train.json'}", f"images={tmp}"], env, timeout=120)
    check(not r.timed_out and r.seconds < 20 and "image" in r.stdout, f"9 data check of 200,000 COCO annotations: {r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        print(f"lucid: {LUCID}; root: {ROOT}", flush=True)
        data = synth_data(tmp / "data", env, n_train=8, n_val=4, imgsz=64)
        split_sources(tmp, env)
        labels_that_are_not_files(tmp, env, data)
        dense_labels(tmp, env, data)
        coco_speed(tmp, env)
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
