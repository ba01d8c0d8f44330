"""model.track end to end through the installed package (track_e2e.py, run with the package's
Python on one-epoch weights raised to confident detections) on a short video of moving shapes
(tests/common/moving_shapes.py, written as Motion JPEG): tracks on every frame, ids continuous, masks
following their boxes, persist=True over frames in memory equal to the video's tracks; then the
reference's BYTETracker fed the same detections (each frame's predict at conf 0.1) gives the same
ids, scores and classes, boxes within 1e-3 px; and `lucid track` from the console script."""
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


def write_video(path, frames, fps=10):
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


def main():
    with package_workdir() as (tmp, env, work):
        confident_model(tmp, env, work / "weights.safetensors")
        frames, _ = video(frames=16, size=(128, 160))
        write_video(work / "shapes.avi", frames)
        run_package_script("track_e2e.py", work, env)
        compare_with_reference(work / "track_e2e.npz")
        script = PACKAGE_PYTHON.parent / "lucid"
        r = subprocess.run([str(script), "track", "model=weights.safetensors", "source=shapes.avi",
                            "tracker=bytetrack.yaml", "verbose=False"], cwd=work, env=env, capture_output=True, text=True)
        lines = [line for line in r.stdout.splitlines() if " tracks" in line]
        check(r.returncode == 0 and len(lines) == len(frames) and "(ids 1 2 3" in lines[0],
              f"lucid track (console script): one line per frame with its ids: {lines[:1]}")
        r = subprocess.run([str(script), "track", "model=weights.safetensors", "source=shapes.avi", "tracker=x.yaml"],
                           cwd=work, env=env, capture_output=True, text=True)
        check(r.returncode == 1 and "tracker=x.yaml" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"lucid track with a missing tracker file: exit 1, one line naming it: {r.stderr.strip()!r}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
