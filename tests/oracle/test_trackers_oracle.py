"""lucid_yolo's trackers (python/lucid_yolo/trackers, loaded from the source tree without the native
module) against the reference's BYTETracker and BOTSORT fed the same detections, frame by frame, on
the synthetic moving-shapes video (tests/common/moving_shapes.py: four shapes, two crossing with the
covered one scored low, one hidden for 8 frames, missed boxes and false positives, a static and a
panning camera):

- every frame's output identical: the same track ids on the same detections (idx), scores and
  classes, the filtered boxes within 1e-3 px;
- MOT metrics (MOTA, ID switches, fragmentations) of both against the ground truth equal, and lucid's
  within stated bounds: MOTA >= 0.9, no ID switch, each shape one id of its own through the crossing
  and the 8-frame gap, no more fragmentations than the boxes the detector missed;
- BoT-SORT with each camera motion compensation (sparseOptFlow, orb, sift, ecc) on the panning video:
  the reference's tracks frame by frame (the bounds for all but orb, whose estimates of this video's
  motion are poor for both; ecc on its first 16 frames, at about 1 s a frame);
- each compensation's per-frame 2x3 warps equal to the reference GMC's (within 1e-6) on a camera
  turning and moving sub-pixel over a noise texture (with a cut) and on the panning video, and
  close to the texture's true motion;
- the same on 24 boxes in random motion (births, deaths, contested detections), with the default
  settings and with fuse_score False, match_thresh 0.6;
- the Kalman filters (xyah, xywh) against the reference's on random boxes (1e-9 relative);
- the numpy assignment solver against scipy (optimal total cost) and the thresholded assignment
  against lap.lapjv's cost_limit semantics;
- the shipped bytetrack.yaml / botsort.yaml hold the reference's keys and default values (read with
  PyYAML and with the package's own reader for venvs without it), and bad files are refused naming
  the key.

The reference imports lap (its assignment solver, pip-installed on first use); where the project
venv lacks it, a stand-in with lap.lapjv's documented semantics for extend_cost=True, cost_limit=L
(the matrix padded to (n+m) x (n+m) with L/2 for leaving a row or column unpaired, solved exactly by
scipy) takes its place. lucid's trackers run with their numpy solver, as in the package's venv."""
import importlib.util
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import linear_sum_assignment as scipy_lsa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import check, failures  # noqa: E402
from moving_shapes import crowd, detections, mot_metrics, panned_texture, video  # noqa: E402

SOURCE = Path(__file__).resolve().parents[2]
TRACKERS = SOURCE / "python" / "lucid_yolo" / "trackers"

from reference_trackers import LAP, Dets, RefBOTSORT, RefBYTETracker, reference_args  # noqa: E402
from ultralytics.trackers.utils import kalman_filter as ref_kalman  # noqa: E402
from ultralytics.trackers.utils.gmc import GMC as RefGMC  # noqa: E402
from ultralytics.trackers.utils import matching as ref_matching  # noqa: E402


def load_lucid_trackers():
    """lucid_yolo.trackers from the source tree as lucid_src.trackers, under a bare parent package (its
    own modules importable, the package's __init__, which loads the native module, not run)."""
    parent = types.ModuleType("lucid_src")
    parent.__path__ = [str(TRACKERS.parent)]
    sys.modules["lucid_src"] = parent
    spec = importlib.util.spec_from_file_location("lucid_src.trackers", TRACKERS / "__init__.py",
                                                  submodule_search_locations=[str(TRACKERS)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["lucid_src.trackers"] = module
    spec.loader.exec_module(module)
    return module


lt = load_lucid_trackers()
from lucid_src.trackers import kalman as lucid_kalman, matching as lucid_matching  # noqa: E402

lucid_matching.USE_SCIPY = False  # the package's venv has no scipy: its solver is the numpy one


def same_outputs(ours, ref):
    """(ok, first difference): ids, scores, classes and indices equal, boxes within 1e-3 px."""
    if ours.shape != ref.shape:
        return False, f"{len(ours)} tracks against the reference's {len(ref)}"
    if not (np.array_equal(ours[:, 4], ref[:, 4]) and np.array_equal(ours[:, 7], ref[:, 7])
            and np.allclose(ours[:, 5:7], ref[:, 5:7])):
        return False, f"ids/idx {ours[:, [4, 7]].tolist()} against {ref[:, [4, 7]].tolist()}"
    worst = np.abs(ours[:, :4] - ref[:, :4]).max() if len(ours) else 0.0
    return worst <= 1e-3, f"boxes within {worst:.2g} px"


def compare_run(label, kind, frames, detected, truth, bounds=True, **changes):
    dets, missed = detected
    args = reference_args(f"{kind}.yaml", **changes)
    ours_tracker = (lt.BOTSORT if kind == "botsort" else lt.BYTETracker)(lt.load_tracker_config(f"{kind}.yaml"))
    for k, v in changes.items():
        setattr(ours_tracker.args, k, v)
    if kind == "botsort":
        ours_tracker.gmc = lt.bot_sort.GMC(args.gmc_method)
    ref_tracker = (RefBOTSORT if kind == "botsort" else RefBYTETracker)(args)
    ours_out, ref_out, first_diff, worst = [], [], None, 0.0
    t_ours = t_ref = 0.0
    for f, (img, d) in enumerate(zip(frames, dets)):
        t = time.perf_counter()
        a = ours_tracker.update(d, img)
        t_ours += time.perf_counter() - t
        t = time.perf_counter()
        b = ref_tracker.update(Dets(d), img)
        t_ref += time.perf_counter() - t
        b = np.asarray(b, dtype=np.float32).reshape(-1, 8)
        ours_out.append(a)
        ref_out.append(b)
        ok, what = same_outputs(a, b)
        if len(a) == len(b) and len(a):
            worst = max(worst, float(np.abs(a[:, :4] - b[:, :4]).max()))
        if not ok and first_diff is None:
            first_diff = f"frame {f}: {what}"
    ids = sorted({int(i) for o in ours_out for i in o[:, 4]})
    check(first_diff is None, f"{label}: {len(frames)} frames, the reference's tracks frame by frame "
                              f"(ids {ids}; boxes within {worst:.2g} px){'' if first_diff is None else ': ' + first_diff}")
    m_ours, m_ref = mot_metrics(truth, ours_out), mot_metrics(truth, ref_out)
    print(f"     MOT lucid {m_ours}\n     MOT reference {m_ref}\n     time lucid {t_ours * 1e3:.0f} ms, "
          f"reference {t_ref * 1e3:.0f} ms")
    check(m_ours == m_ref, f"{label}: MOT metrics equal the reference's (MOTA {m_ours['MOTA']:.3f}, "
                           f"IDSW {m_ours['IDSW']}, FRAG {m_ours['FRAG']})")
    if not bounds:
        return ours_out
    one_each = all(len(v) == 1 for v in m_ours["ids"].values()) and len(m_ours["ids"]) == 4 and \
        len({v[0] for v in m_ours["ids"].values()}) == 4
    check(m_ours["MOTA"] >= 0.9 and m_ours["IDSW"] == 0 and m_ours["FRAG"] <= missed and one_each,
          f"{label}: MOTA {m_ours['MOTA']:.3f} >= 0.9, no ID switch, one id per shape through the crossing and "
          f"the gap {m_ours['ids']}, fragmentations {m_ours['FRAG']} <= the {missed} boxes the detector missed")
    return ours_out


def check_kalman():
    rng = np.random.default_rng(3)
    worst = 0.0
    for ours, ref in ((lucid_kalman.KalmanFilterXYAH(), ref_kalman.KalmanFilterXYAH()),
                      (lucid_kalman.KalmanFilterXYWH(), ref_kalman.KalmanFilterXYWH())):
        m = np.array([100.0, 80.0, 0.7 if isinstance(ours, lucid_kalman.KalmanFilterXYWH) is False else 30.0, 40.0])
        (a, pa), (b, pb) = ours.initiate(m), ref.initiate(m)
        for _ in range(20):
            a, pa = (x[0] for x in ours.predict(a[None], pa[None]))
            b, pb = (x[0] for x in ref.multi_predict(b[None], pb[None]))
            z = b[:4] + rng.normal(0, 2, 4) * [1, 1, 0.01 if m[2] < 1 else 1, 1]
            a, pa = ours.update(a, pa, z)
            b, pb = ref.update(b, pb, z)
            worst = max(worst, np.abs(a - b).max() / np.abs(b).max(), np.abs(pa - pb).max() / np.abs(pb).max())
    check(worst < 1e-9, f"Kalman xyah and xywh: 20 predict/update steps, the reference's states within {worst:.2g}")


def check_assignment():
    rng = np.random.default_rng(4)
    worst, same_pairs, cases = 0.0, 0, 400
    for k in range(cases):
        n, m = rng.integers(0, 14, 2)
        c = rng.random((n, m)).astype(np.float32)
        if k % 4 == 0:
            c = np.round(c * 4) / 4  # ties
        r1, c1 = lucid_matching.linear_sum_assignment(c)
        r2, c2 = scipy_lsa(c)
        worst = max(worst, abs(float(c[r1, c1].sum()) - float(c[r2, c2].sum())))
        if k % 4:
            thresh = float(rng.uniform(0.2, 0.9))
            ours = lucid_matching.linear_assignment(c, thresh)
            ref = ref_matching.linear_assignment(c, thresh)
            same_pairs += (sorted(map(tuple, np.asarray(ours[0]).tolist())) == sorted(map(tuple, ref[0]))
                           and list(ours[1]) == list(ref[1]) and list(ours[2]) == list(ref[2]))
    check(worst < 1e-5, f"numpy assignment solver: {cases} matrices up to 13x13 (ties among them), scipy's optimal cost "
                        f"within {worst:.2g}")
    check(same_pairs == cases - cases // 4, f"thresholded assignment: {same_pairs}/{cases - cases // 4} random matrices "
                                            f"pair as the reference's linear_assignment ({LAP})")


GMC_METHODS = ("sparseOptFlow", "orb", "sift", "ecc")
GMC_TOLERANCE = 1e-6  # the reference's warps, per entry (the same OpenCV calls on the same pixels)
# Each method's largest error against the true camera motion on the texture (a matrix entry; the
# translation in px): ORB's binary descriptors on a smooth texture match least precisely.
GMC_ACCURACY = {"sparseOptFlow": 0.1, "orb": 1.0, "sift": 0.1, "ecc": 0.1}


def gmc_warps(gmc, frames, boxes):
    return [np.asarray(gmc.apply(f, b), dtype=np.float64) for f, b in zip(frames, boxes)]


def check_gmc():
    """Each camera motion compensation's per-frame 2x3 warps against the reference's GMC: on a camera
    turning and moving sub-pixel over a noise texture (with a cut to an unrelated frame, where ECC
    fails to converge), and on the panning moving-shapes video with its confident detections masked
    out of the point methods' keypoints (ECC, which masks nothing and runs up to its 5000 iterations
    on these frames, is compared there through BoT-SORT's tracks in main)."""
    texture, truth = panned_texture(frames=16, cut=8)
    shapes, shape_truth = video(frames=24, pan=(2.0, 1.0), seed=5)
    confident = [d[d[:, 4] >= 0.25] for d in detections(shape_truth, seed=6)[0]]
    for method in GMC_METHODS:
        worst, accuracy, seen = 0.0, 0.0, 0
        runs = [(texture, [None] * len(texture))] + ([(shapes, confident)] if method != "ecc" else [])
        for frames, boxes in runs:
            seen += len(frames)
            ours = gmc_warps(lt.gmc.GMC(method), frames, boxes)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = gmc_warps(RefGMC(method), frames, [None if b is None else b[:, :4] for b in boxes])
            worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(ours, ref)))
            if frames is texture:
                accuracy = max(float(np.abs(a - t).max()) for a, t in zip(ours, truth) if t is not None)
        check(worst <= GMC_TOLERANCE and accuracy <= GMC_ACCURACY[method],
              f"gmc_method {method}: {seen} frames, the reference's 2x3 warps within "
              f"{worst:.2g} (<= {GMC_TOLERANCE:g}); the texture's true motion within {accuracy:.3f} "
              f"(<= {GMC_ACCURACY[method]})")


def check_config():
    ref_dir = Path(sys.modules["ultralytics"].__file__).parent / "cfg" / "trackers"
    for name in ("bytetrack.yaml", "botsort.yaml"):
        ours, ref = yaml.safe_load((TRACKERS / name).read_text()), yaml.safe_load((ref_dir / name).read_text())
        check(ours == ref, f"{name}: the reference's keys and default values ({len(ours)} keys)")
        saved, sys.modules["yaml"] = sys.modules["yaml"], None  # as in a venv without PyYAML
        try:
            flat = lt.config._read_yaml(TRACKERS / name)
        finally:
            sys.modules["yaml"] = saved
        check(flat == ours, f"{name}: read without PyYAML (the package's own reader), the same mapping")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("tracker_type: bytetrack\nmatch_tresh: 0.8\n", "match_tresh"),
                 ("tracker_type: tracktrack\n", "tracker_type"),
                 ("tracker_type: bytetrack\ntrack_buffer: many\n", "track_buffer"),
                 ("tracker_type: botsort\nwith_reid: True\n", "with_reid"),
                 ("tracker_type: botsort\ngmc_method: surf\n", "gmc_method")]
        for text, key in cases:
            path = Path(tmp) / "t.yaml"
            path.write_text(text)
            try:
                lt.make_tracker(str(path))
                message = "accepted"
            except (ValueError, FileNotFoundError) as e:
                message = str(e)
            check(key in message and message != "accepted", f"{text.strip()!r} refused naming {key}: {message}")


def main():
    start = time.monotonic()
    check_config()
    check_kalman()
    check_assignment()
    check_gmc()
    frames, truth = video()
    dets = detections(truth)
    compare_run("ByteTrack", "bytetrack", frames, dets, truth)
    compare_run("BoT-SORT gmc none", "botsort", frames, dets, truth, gmc_method="none")
    compare_run("BoT-SORT sparseOptFlow", "botsort", frames, dets, truth)
    frames, truth = video(pan=(2.0, 1.0), seed=5)
    dets = detections(truth, seed=6)
    compare_run("ByteTrack, panning camera", "bytetrack", frames, dets, truth)
    compare_run("BoT-SORT sparseOptFlow, panning camera", "botsort", frames, dets, truth)
    for method in GMC_METHODS[1:]:
        # ORB's estimates of this video's motion are poor (its blocky texture repeats), the reference's
        # equally: its tracks must be the reference's, the tracking bounds do not apply. ECC (5000
        # iterations, about 1 s a frame in either implementation) runs the first 16 frames.
        n = 16 if method == "ecc" else len(frames)
        compare_run(f"BoT-SORT {method}, panning camera", "botsort", frames[:n], dets[:n], truth[:n],
                    bounds=method != "orb", gmc_method=method)
    truth = crowd()
    frames = [None] * len(truth)
    for kind in ("bytetrack", "botsort"):
        compare_run(f"{kind}, 24 objects in random motion", kind, frames, detections(truth, seed=8), truth, bounds=False)
        compare_run(f"{kind}, 24 objects, fuse_score False, match_thresh 0.6", kind, frames, detections(truth, seed=9),
                    truth, bounds=False, fuse_score=False, match_thresh=0.6)
    print(f"{time.monotonic() - start:.1f} s")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
