"""Tracking over a stream of prediction Results, as the reference's track mode: each frame's boxes go
to the tracker; the frame's Results then holds the confirmed tracks only, in the tracker's order,
with (n, 7) boxes [x1, y1, x2, y2, id, conf, cls] (the tracker's filtered box) and the masks of the
detections they were matched to. A frame whose tracks are all unconfirmed yet comes back empty; a
frame with no track at all comes back as predicted (is_track False), as the reference's does.

save=True writes each frame drawn with its tracks (Results.plot, the native drawer of ``lucid
predict``) into the run folder, runs/segment/track (track2, ... unless exist_ok), under the
reference's names: a video's frames as <stem>.avi (Motion JPEG, at the source's whole frames per
second, 30 when it does not say), with save_frames also <stem>_frames/<stem>_<frame>.jpg; an image as
<stem>.jpg; a second source of the same stem as <stem>-2."""
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from . import TRACKER_MAP
from .config import load_tracker_config

# Options that write predict's own (untracked) labels, crops and COCO results: refused for tracking.
WRITING = ("save_txt", "save_json", "save_crop")


class TrackSession:
    """One tracker over a YOLO object's track() calls: kept by persist=True, replaced otherwise."""

    def __init__(self, tracker="botsort.yaml"):
        self.cfg = load_tracker_config(tracker)
        self.tracker = TRACKER_MAP[self.cfg.tracker_type](self.cfg)
        self.path = None

    def _needs_image(self):
        gmc = getattr(self.tracker, "gmc", None)
        return gmc is not None and gmc.method is not None

    def __call__(self, result, persist=False):
        """The frame's Results with its tracks. Without persist, a new source path (the next video or
        image) restarts the tracker, ids from 1."""
        if not persist and self.path != result.path:
            self.tracker.reset()
            self.path = result.path
        data = result.boxes.data if result.boxes is not None else np.zeros((0, 6), np.float32)
        data = (data.cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)).astype(np.float32)
        dets = np.concatenate([data[:, :4], data[:, -2:]], 1) if len(data) else np.zeros((0, 6), np.float32)
        tracks = self.tracker.update(dets, result.orig_img if self._needs_image() else None)
        if len(tracks) == 0:
            if any(not t.is_activated for t in self.tracker.tracked_stracks):
                return result[:0]  # tracks are shown once confirmed
            return result
        tracked = result[tracks[:, -1].astype(int)]
        tracked.update(boxes=torch.as_tensor(tracks[:, :-1]))
        return tracked


def _flag(value, default):
    """A boolean option as a Python value or the command line's spelling ("False")."""
    if value is None:
        return default
    if isinstance(value, str):
        from ..yaml_scalar import scalar
        value = scalar(value)
    return bool(value)


def make_run_dir(project, name, exist_ok):
    """project/name, else name2, name3, ... (the first free one, claimed atomically), as lucid's
    native commands number their run folders."""
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"option name={name}: a run name is one folder name (it cannot leave the project)")
    project = Path(project)
    if exist_ok:
        (project / name).mkdir(parents=True, exist_ok=True)
        return project / name
    from ..folders import first_free_folder  # here: the oracle test loads trackers/ without the package

    folder = first_free_folder(project, name)
    if folder is None:
        raise FileExistsError(f"{project / name}: no free run folder name")
    return folder


class TrackOutput:
    """save=True of a track() call: the drawing options as predict's save=True takes them (show_labels,
    show_conf, show_boxes, line_width), the run folder (project=, name=, exist_ok=)."""

    def __init__(self, options):
        self.labels = _flag(options.get("show_labels"), True)
        self.conf = _flag(options.get("show_conf"), True)
        self.boxes = _flag(options.get("show_boxes"), True)
        self.line_width = float(options.get("line_width") or 0)
        self.frames = _flag(options.pop("save_frames", None), False)
        self.verbose = _flag(options.get("verbose"), True)
        self.project, self.name = options.get("project"), str(options.get("name") or "track")
        self.exist_ok = _flag(options.get("exist_ok"), False)
        self.run_dir = self.video = self.source = None
        self.names = {}  # source path -> output name

    def _output_name(self, path):
        if path not in self.names:
            stem, k = Path(path).stem, 1
            taken = set(self.names.values())
            name = stem
            while name in taken:
                k += 1
                name = f"{stem}-{k}"
            self.names[path] = name
        return self.names[path]

    def save(self, result):
        """Draws the frame's tracks and writes them into its video or image file."""
        if self.run_dir is None:
            from .. import _lucid
            project = self.project or Path(_lucid.settings()["runs_dir"]) / "segment"
            self.run_dir = make_run_dir(project, self.name, self.exist_ok)
        result.save_dir = str(self.run_dir)
        style = {"conf": self.conf, "labels": self.labels, "boxes": self.boxes, "line_width": self.line_width}
        name = self._output_name(result.path)
        if result.frame is None:
            result.plot(**style, save=True, filename=self.run_dir / f"{name}.jpg")
            return
        drawn = result.plot(**style)
        if self.source != result.path:
            self.close_video()
            from ..video import MjpegAviWriter, video_fps
            fps = video_fps(result.path)
            self.video = MjpegAviWriter(self.run_dir / f"{name}.avi", drawn.shape[1], drawn.shape[0],
                                        int(fps) if fps >= 1 else 30)
            self.source = result.path
        jpeg = _jpeg(drawn)
        self.video.write(jpeg)
        if self.frames:
            frames_dir = self.run_dir / f"{name}_frames"
            frames_dir.mkdir(exist_ok=True)
            (frames_dir / f"{name}_{result.frame}.jpg").write_bytes(jpeg)

    def close_video(self):
        if self.video is not None:
            self.video.close()
        self.video = self.source = None

    def saved(self, results):
        """results, each one written as it passes; the video is completed however the iteration
        ends (a consumer that stops early keeps the frames so far)."""
        try:
            for r in results:
                self.save(r)
                yield r
        finally:
            self.close_video()
        if self.run_dir is not None and self.verbose:
            from ..logger import LOGGER
            LOGGER.info(f"Results saved to {self.run_dir}")


def _jpeg(bgr):
    """The JPEG file bytes of a BGR image, by the native encoder that writes predict's images."""
    from .. import _lucid
    fd, path = tempfile.mkstemp(suffix=".jpg")
    os.close(fd)
    try:
        _lucid.write_image(path, np.ascontiguousarray(bgr[..., ::-1]).tobytes(), bgr.shape[0], bgr.shape[1])
        return Path(path).read_bytes()
    finally:
        os.unlink(path)


def track_options(kwargs):
    """(the predict options of a track() call, its TrackOutput or None): the reference's conf 0.1 when
    not given (the second association takes boxes down to track_low_thresh) and batch 1; save=True
    is written here from the tracked frames (predict's own files would show untracked boxes), the
    other writing options refused."""
    for key in WRITING:
        if kwargs.get(key) not in (None, False, "False", "false"):
            raise ValueError(f"track(): {key}={kwargs[key]} is not supported: predict's files would show untracked "
                             f"boxes; draw each frame's tracks with results[i].plot() or results[i].save()")
        kwargs.pop(key, None)
    output = TrackOutput(kwargs) if _flag(kwargs.pop("save", None), False) else None
    kwargs.pop("save_frames", None)
    kwargs["conf"] = 0.1 if kwargs.get("conf") is None else kwargs["conf"]
    kwargs["batch"] = kwargs.get("batch") or 1
    return kwargs, output
