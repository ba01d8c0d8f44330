"""Run by test_track.py with the installed lucid_yolo in a folder holding weights.safetensors and
shapes.avi: model.track over the video (list and stream=True), frame by frame over the decoded frames
in memory with persist=True, the default botsort.yaml, plot() with ids, save=True's video, and
refusals; writes track_e2e.npz (each frame's predict detections at conf 0.1 and its tracked boxes;
the saved videos' paths and each frame drawn with ids, without ids and without labels) for the
driver's comparisons with the reference's tracker and with the video's frames."""
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.environ["LUCID_TEST_COMMON"])
from lucid_runs import check, failures  # noqa: E402

from lucid_yolo import YOLO  # noqa: E402


def box_iou(a, b):
    iw = (torch.minimum(a[2], b[2]) - torch.maximum(a[0], b[0])).clamp(min=0)
    ih = (torch.minimum(a[3], b[3]) - torch.maximum(a[1], b[1])).clamp(min=0)
    inter = iw * ih
    return float(inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter))


def masks_follow_boxes(tracked, plain):
    """Each tracked box's mask is the mask of the predicted detection it tracks (same score and
    class, the box overlapping at IoU > 0.5)."""
    t, p = tracked.boxes.data, plain.boxes.data
    if tracked.masks is None or len(tracked.masks) != len(t):
        return False
    for i in range(len(t)):
        js = [j for j in range(len(p)) if p[j, 4] == t[i, 5] and p[j, 5] == t[i, 6] and box_iou(p[j, :4], t[i, :4]) > 0.5]
        if not js or not any(torch.equal(tracked.masks.data[i], plain.masks.data[j]) for j in js):
            return False
    return True


def same_tracks(a, b):
    return len(a) == len(b) and all(torch.equal(x.boxes.data, y.boxes.data) for x, y in zip(a, b))


def without_ids(r):
    """The tracked frame's Results with its boxes as predicted ones: the same boxes and masks, tagged
    "name conf" without the id."""
    plain = r[:]
    plain.update(boxes=r.boxes.data[:, [0, 1, 2, 3, 5, 6]])
    return plain


def check_saved_video(model, tracked):
    """save=True (and show_labels=False under another name): the run folder, the video's name, its
    frames decoded by lucid's own reader; returns each frame drawn with ids, without ids and without
    labels for the driver's comparison with the video's frames (it has OpenCV)."""
    saved = model.track("shapes.avi", tracker="bytetrack.yaml", save=True, verbose=False)
    video = Path("runs/segment/track/shapes.avi")
    check(same_tracks(saved, tracked) and all(r.save_dir and Path(r.save_dir).resolve() == video.parent.resolve()
                                              for r in saved),
          f"save=True: the same tracks, each Results' save_dir the run folder {saved[0].save_dir}")
    check(video.is_file() and sorted(p.name for p in video.parent.iterdir()) == ["shapes.avi"],
          f"save=True writes {video} alone: {sorted(p.name for p in video.parent.iterdir())}")
    decoded = model.predict(str(video), verbose=False)
    check(len(decoded) == len(tracked) and decoded[0].orig_shape == tracked[0].orig_shape,
          f"lucid's own video reader decodes {len(decoded)} frames of {decoded[0].orig_shape} from it "
          f"(the source's {len(tracked)})")
    model.track("shapes.avi", tracker="bytetrack.yaml", save=True, show_labels=False, name="bare", verbose=False)
    check(Path("runs/segment/bare/shapes.avi").is_file(),
          "save=True, show_labels=False, name='bare': runs/segment/bare/shapes.avi")
    return {"video": str(video.resolve()), "bare_video": str(Path("runs/segment/bare/shapes.avi").resolve()),
            **{f"ids{i}": r.plot() for i, r in enumerate(tracked)},
            **{f"noids{i}": without_ids(r).plot() for i, r in enumerate(tracked)},
            **{f"nolabels{i}": r.plot(labels=False) for i, r in enumerate(tracked)}}


def check_video_parts(model, tracked):
    """The video writer past one RIFF part (1 GiB in use; 64 kB here): OpenDML's AVIX parts decoded
    whole by lucid's reader, the frame rate read back."""
    from lucid_yolo.trackers.track import _jpeg
    from lucid_yolo.video import MjpegAviWriter, video_fps

    writer = MjpegAviWriter("parts.avi", *tracked[0].orig_img.shape[1::-1], 7, part_size=1 << 16)
    for r in tracked:
        writer.write(_jpeg(r.orig_img))
    writer.close()
    decoded = model.predict("parts.avi", verbose=False)
    check(len(writer.parts) >= 3 and len(decoded) == len(tracked) and video_fps("parts.avi") == 7,
          f"a video of {len(writer.parts)} RIFF parts: lucid's reader decodes {len(decoded)} frames "
          f"(of {len(tracked)}), {video_fps('parts.avi'):g} fps (7 written)")
    return {"parts_video": str(Path("parts.avi").resolve())}


def main():
    model = YOLO("weights.safetensors")
    plain = model.predict("shapes.avi", conf=0.1, verbose=False)
    tracked = model.track("shapes.avi", tracker="bytetrack.yaml", verbose=False)
    n = len(plain)
    check(n >= 10 and len(tracked) == n and all(r.boxes.is_track and r.boxes.data.shape[1] == 7 for r in tracked),
          f"track over a {n}-frame video: every frame tracked, boxes (n, 7)")
    ids = [r.boxes.id.int().tolist() for r in tracked]
    first = ids[0]
    kept = sum(len(set(a) & set(b)) for a, b in zip(ids, ids[1:])) / max(1, sum(len(a) for a in ids[:-1]))
    check(first == list(range(1, len(first) + 1)) and kept >= 0.9,
          f"ids 1..{len(first)} on the first frame, {kept:.0%} of each frame's ids go on to the next")
    check(all(masks_follow_boxes(t, p) for t, p in zip(tracked, plain)),
          "every tracked box carries the mask of the detection it tracks")
    streamed = list(model.track("shapes.avi", tracker="bytetrack.yaml", stream=True, verbose=False))
    check(same_tracks(streamed, tracked), "stream=True yields the same tracks")
    loop_model = YOLO("weights.safetensors")
    loop = [loop_model.track(r.orig_img, persist=True, tracker="bytetrack.yaml", verbose=False)[0] for r in plain]
    check(same_tracks(loop, tracked), "frames in memory, one call each with persist=True: the video's tracks")
    fresh = [loop_model.track(r.orig_img, tracker="bytetrack.yaml", verbose=False)[0] for r in plain[:3]]
    check(all(r.boxes.id.int().tolist() == first for r in fresh),
          "without persist each call starts again: ids from 1 on every frame")
    bot = model.track("shapes.avi", verbose=False)
    check(len(bot) == n and all(r.boxes.is_track for r in bot[1:]), "the default tracker (botsort.yaml) tracks every frame")
    drawn, untracked = tracked[0].plot(), plain[0].plot()
    check(drawn.shape == untracked.shape and not np.array_equal(drawn, untracked),
          "plot() of a tracked frame draws (its id labels differ from the untracked drawing)")
    for kwargs, word in (({"tracker": "ocsort.yaml"}, "tracker=ocsort.yaml"), ({"save_txt": True}, "save_txt=True")):
        try:
            model.track("shapes.avi", **kwargs)
            message = "accepted"
        except (ValueError, FileNotFoundError) as e:
            message = str(e)
        check(word in message, f"track({kwargs}) refused naming it: {message}")
    drawings = {**check_saved_video(model, tracked), **check_video_parts(model, tracked)}
    np.savez("track_e2e.npz", n=n, **{f"det{i}": r.boxes.data.numpy() for i, r in enumerate(plain)},
             **{f"trk{i}": r.boxes.data.numpy() for i, r in enumerate(tracked)}, **drawings)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
