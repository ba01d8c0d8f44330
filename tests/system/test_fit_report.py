"""fit_report.json: every digest is recomputed here from the fit's own files (the last checkpoint,
step_losses.f32, the report's own values), two runs with the same seed write identical reports
except for the time and memory fields (and the stage times the second one asks for, which leave its
checkpoint bytes unchanged; also when one renders its augmented images with the tensor form,
gpu_augment=True), and a different seed changes the digests. The default routing on the CPU: the
whole-step replay is on by default and runs natively with its reason counted; capture_step=False
leaves the report's replay summary empty. The loader-wait figure is in the report."""
import hashlib
import json
import os
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import MEASURED, digest, train as run_train  # noqa: E402

ARGS = ["epochs=1", "batch=8", "imgsz=64", "workers=2", "device=cpu"]
FIELDS = ["format", "fit_seconds", "peak_allocated_mib", "peak_reserved_mib", "epochs", "batches", "optimizer_steps",
          "ema_updates", "sha256", "scheduler", "validation", "replay"]
HASHES = ["model", "optimizer", "scheduler", "ema", "step_losses", "validation"]


def train(env, project, name, extra=()):
    run_train(ARGS, env, project, name, extra)
    return json.loads((project / name / "fit_report.json").read_text())


def checkpoint_sections(path):
    """The checkpoint's tensors per section ('model', 'ema', 'optim'), raw bytes in written order."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = json.loads(header.pop("__metadata__")["lucid"])
    data = raw[8 + n:]
    sections = {}
    for key, d in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = d["data_offsets"]
        sections.setdefault(key.split("/", 1)[0], []).append(data[a:b])
    return sections, meta


def expected_hashes(run, report):
    sections, meta = checkpoint_sections(run / "weights" / "last.safetensors")
    sha = lambda b: hashlib.sha256(b).hexdigest()
    s = report["scheduler"]
    sched = b"".join(struct.pack("<dd", lr, m) for lr, m in zip(s["lr"], s["momentum"]))
    sched += struct.pack("<qq", s["accumulate"], s["last_opt_step"])
    v = report["validation"]
    return {
        "model": sha(b"".join(sections["model"])),
        "optimizer": sha(b"".join(sections["optim"])),
        "scheduler": sha(sched),
        "ema": sha(b"".join(sections["ema"]) + struct.pack("<q", meta["ema_updates"])),
        "step_losses": sha((run / "step_losses.f32").read_bytes()),
        "validation": sha(struct.pack("<13d", *v["metrics"], *v["losses"])),
    }


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        a = train(env, project, "a")
        b = train(env, project, "b", ["stage_times=True"])
        c = train(env, project, "c", ["seed=1"])
        d = train(env, project, "d", ["gpu_augment=True"])
        off = train(env, project, "off", ["capture_step=False"])

        missing = [f for f in FIELDS if f not in a] + [h for h in HASHES if h not in a["sha256"]]
        if missing:
            failures.append(f"fields missing from fit_report.json: {missing}")
        if a["format"] != "lucid-fit-report-1" or a["epochs"] != 1:
            failures.append(f"unexpected format/epochs: {a['format']} {a['epochs']}")
        cpu = "training step: the fit runs on the CPU (recordings are CUDA graphs)"
        ts = a["replay"].get("training_step", {})
        if a["replay"].get("native_reasons", {}).get(cpu) != a["batches"] or ts.get("replayed_steps") != 0:
            failures.append(f"default CPU fit: every step native with the CPU reason expected: {a['replay']}")
        if off["replay"] != {}:
            failures.append(f"capture_step=False: replay summary not empty: {off['replay']}")
        if digest(project / "a" / "weights" / "last.safetensors") != digest(project / "off" / "weights" / "last.safetensors"):
            failures.append("capture_step=False changed the checkpoint bytes")
        lw = a.get("loader_wait", {})
        if not (lw.get("steps") == a["batches"] and 0 <= lw.get("host_s", -1) <= lw.get("epochs_s", -1)
                and 0 <= lw.get("share", -1) <= 1 and "device_idle_s" not in lw):
            failures.append(f"loader_wait in the report: {lw}")
        st = a.get("step_time", {})
        steady = st.get("steady", {})
        if not (st.get("clock") == "host" and [e.get("steps") for e in st.get("epochs", [])] == [a["batches"]]
                and steady.get("steps") == a["batches"] and steady.get("after_first_epoch") is False
                and 0 < steady.get("min_ms", 0) <= steady.get("median_ms", 0) <= steady.get("max_ms", 0)
                and steady.get("mean_ms", 0) * a["batches"] <= a["fit_seconds"] * 1000):
            failures.append(f"step_time in the report: {st}")
        if not 0 < a["fit_seconds"] or a["peak_allocated_mib"] != 0 or a["peak_reserved_mib"] != 0:
            failures.append(f"CPU fit: time {a['fit_seconds']}, memory {a['peak_allocated_mib']}/{a['peak_reserved_mib']}")
        steps = len((project / "a" / "step_losses.f32").read_bytes()) // 20
        if a["batches"] != steps or a["batches"] < 1 or not 1 <= a["optimizer_steps"] <= a["batches"]:
            failures.append(f"batches {a['batches']} (step losses: {steps}), optimizer steps {a['optimizer_steps']}")

        want = expected_hashes(project / "a", a)
        for k in HASHES:
            ok = a["sha256"][k] == want[k]
            print(f"{k:12s} {a['sha256'][k][:16]} recomputed from the run's files: {'equal' if ok else 'DIFFERS ' + want[k][:16]}")
            if not ok:
                failures.append(f"sha256.{k} is not the digest of the fit's bytes")

        if "stage_times" in a:
            failures.append("stage_times in a report that did not ask for them")
        st = b.get("stage_times", {})
        calls = {k: v["calls"] for k, v in st.items()}
        want_calls = {"data": b["batches"] + 1, "upload": b["batches"], "forward": b["batches"], "loss": b["batches"],
                      "backward": b["batches"], "clip gradients": b["optimizer_steps"],
                      "optimizer prepare": b["optimizer_steps"], "optimizer apply": b["optimizer_steps"],
                      "EMA": b["optimizer_steps"], "validation": 1}
        wrong = {k: (calls.get(k), n) for k, n in want_calls.items() if calls.get(k) != n}
        if wrong or any(v["host_ms"] <= 0 or "device_ms" in v for v in st.values()):
            failures.append(f"stage_times (calls, expected) {wrong}; report {st}")
        else:
            print("stage_times:", {k: round(v["host_ms"], 1) for k, v in st.items()})
        for run, option in (("b", "stage_times=True"), ("d", "gpu_augment=True")):
            if digest(project / "a" / "weights" / "last.safetensors") != digest(project / run / "weights" / "last.safetensors"):
                failures.append(f"{option} changed the checkpoint bytes")
        same = lambda r: {k: v for k, v in r.items() if k not in MEASURED}
        if same(a) != same(b):
            failures.append("two runs with the same seed wrote different reports: " +
                            str({k: (a[k], b[k]) for k in a if k not in MEASURED and a[k] != b[k]}))
        else:
            print("same seed twice: identical reports apart from time and memory")
        if same(a) != same(d):
            failures.append("gpu_augment=True changed the report: " +
                            str({k: (a[k], d[k]) for k in a if k not in MEASURED and a[k] != d[k]}))
        else:
            print("gpu_augment=True: identical report")
        changed = [k for k in ("model", "optimizer", "ema", "step_losses") if a["sha256"][k] == c["sha256"][k]]
        if changed:
            failures.append(f"seed=1 left these digests unchanged: {changed}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
