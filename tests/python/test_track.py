"""model.track end to end through the installed package (track_e2e.py, run with the package's
Python on one-epoch weights raised to confident detections) on a short video of moving shapes
(tests/common/moving_shapes.py, written as Motion JPEG): tracks on every frame, ids continuous, masks
following their boxes, persist=True over frames in memory equal to the video's tracks; then the
reference's BYTETracker fed the same detections (each frame's predict at conf 0.1) gives the same
ids, scores and classes, boxes within 1e-3 px; save=True's video (runs/segment/track/shapes.avi) read
by OpenCV: the source's frame count, each frame the tracked drawing, the id tags on it (and none with
show_labels=False); and `lucid track` from the console script, with save=True too."""
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, confident_model, failures  # noqa: E402
from moving_shapes import video  # noqa: E402
from package_env import PACKAGE_PYTHON, package_workdir, run_package_script  # noqa: E402


FPS = 10  # the source video's frame rate


def write_video(path, frames, fps=FPS):
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    for f in frames:
        writer.write(f)
    writer.release()


def compare_with_reference(npz):
    from reference_trackers import Dets, reference_tracker

    saved = np.load(npz)
    tracker = reference_tracker("bytetrack.yaml")
    worst, same = 0.0, 0
    for i in range(int(saved["n"])):
        ref = np.asarray(tracker.update(Dets(saved[f"det{i}"]), None), dtype=np.float32).reshape(-1, 8)
        ours = saved[f"trk{i}"]
        if ours.shape[1] == 7 and len(ours) == len(ref) and np.array_equal(ours[:, 4:], ref[:, 4:7]):
            same += 1
            worst = max(worst, float(np.abs(ours[:, :4] - ref[:, :4]).max()) if len(ref) else 0.0)
    check(same == int(saved["n"]) and worst <= 1e-3,
          f"the reference's BYTETracker on the same detections: {same}/{int(saved['n'])} frames the same ids, "
          f"scores and classes, boxes within {worst:.2g} px")


def read_video(path):
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def closer(frame, near, far):
    """Where the drawings near and far differ (their tags), the frame's mean distance to each."""
    where = np.abs(near.astype(int) - far.astype(int)).max(2) > 40
    if not where.any():
        return None
    return (float(np.abs(frame.astype(int) - near.astype(int))[where].mean()),
            float(np.abs(frame.astype(int) - far.astype(int))[where].mean()))


def check_saved_videos(npz, n):
    """model.track(save=True)'s video read by OpenCV: the source's frame count and size, each frame the
    tracked Results' drawing (JPEG-close), and where the id tags are drawn closer to the drawing with
    ids than to the same boxes tagged without them; the show_labels=False video closer to the
    untagged drawing."""
    saved = np.load(npz)
    frames, bare = read_video(str(saved["video"])), read_video(str(saved["bare_video"]))
    shape = saved["ids0"].shape
    fps = cv2.VideoCapture(str(saved["video"])).get(cv2.CAP_PROP_FPS)
    check(len(frames) == n and len(bare) == n and all(f.shape == shape for f in frames + bare) and fps == FPS,
          f"the saved videos: {len(frames)} and {len(bare)} frames of {frames[0].shape if frames else None} at "
          f"{fps:g} fps (the source: {n} of {shape} at {FPS})")
    worst = max(float(np.abs(f.astype(int) - saved[f"ids{i}"].astype(int)).mean()) for i, f in enumerate(frames))
    tagged = [closer(f, saved[f"ids{i}"], saved[f"noids{i}"]) for i, f in enumerate(frames)]
    untagged = [closer(f, saved[f"nolabels{i}"], saved[f"ids{i}"]) for i, f in enumerate(bare)]
    tagged, untagged = [t for t in tagged if t], [t for t in untagged if t]
    check(worst < 4 and len(tagged) >= n - 2 and all(a < b / 3 for a, b in tagged),
          f"every frame the tracked drawing (mean |difference| up to {worst:.2f}, JPEG); over the id tags of "
          f"{len(tagged)} frames closer to the drawing with ids than without (worst "
          f"{max(a / b for a, b in tagged):.2f} of the distance)")
    check(len(untagged) >= n - 2 and all(a < b / 3 for a, b in untagged),
          f"show_labels=False: over the tags, {len(untagged)} frames closer to the untagged drawing (worst "
          f"{max(a / b for a, b in untagged):.2f} of the distance)")
    parts = read_video(str(saved["parts_video"]))
    check(len(parts) == n, f"the video of several RIFF parts (OpenDML): OpenCV reads {len(parts)} frames of {n}")


def main():
    with package_workdir() as (tmp, env, work):
        confident_model(tmp, env, work / "weights.safetensors")
        frames, _ = video(frames=16, size=(128, 160))
        write_video(work / "shapes.avi", frames)
        run_package_script("track_e2e.py", work, env)
        compare_with_reference(work / "track_e2e.npz")
        check_saved_videos(work / "track_e2e.npz", len(frames))
        script = PACKAGE_PYTHON.parent / "lucid"
        r = subprocess.run([str(script), "track", "model=weights.safetensors", "source=shapes.avi",
                            "tracker=bytetrack.yaml", "verbose=False"], cwd=work, env=env, capture_output=True, text=True)
        lines = [line for line in r.stdout.splitlines() if " tracks" in line]
        check(r.returncode == 0 and len(lines) == len(frames) and "(ids 1 2 3" in lines[0],
              f"lucid track (console script): one line per frame with its ids: {lines[:1]}")
        r = subprocess.run([str(script), "track", "model=weights.safetensors", "source=shapes.avi",
                            "tracker=bytetrack.yaml", "save=True", "verbose=False"], cwd=work, env=env,
                           capture_output=True, text=True)
        written = sorted((work / "runs" / "segment").glob("track*/shapes.avi"))
        count = len(read_video(written[-1])) if written else 0
        check(r.returncode == 0 and len(written) == 2 and written[-1].parent.name == "track2" and count == len(frames),
              f"lucid track save=True: the video in a new run folder, {written[-1] if written else None}, "
              f"{count} frames")
        r = subprocess.run([str(script), "track", "model=weights.safetensors", "source=shapes.avi", "tracker=x.yaml"],
                           cwd=work, env=env, capture_output=True, text=True)
        check(r.returncode == 1 and "tracker=x.yaml" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"lucid track with a missing tracker file: exit 1, one line naming it: {r.stderr.strip()!r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
