"""Ctrl-C during model.train() in Python: SIGINT while epoch 2 of 3 trains stops the fit before its
next step with KeyboardInterrupt, leaving weights/last.safetensors of epoch 1; resuming it from
Python (YOLO(last).train(resume=True), as the reference) ends with the same checkpoint bytes,
per-step losses and results.csv (but time) as an uninterrupted Python run."""
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, checkpoint_state, digest, failures, results_without_time, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402

TRAIN = "data={data!r}, epochs=3, imgsz=64, batch=4, workers=2, device='cpu', close_mosaic=1, project={project!r}"
FIT = """
import sys
from lucid_yolo import YOLO
try:
    YOLO('yolo26n-seg.yaml').train(%s, name=sys.argv[1])
except KeyboardInterrupt:
    print('KeyboardInterrupt caught', flush=True)
    sys.exit(3)
""" % TRAIN
RESUME = "import sys\nfrom lucid_yolo import YOLO\nYOLO(sys.argv[1]).train(resume=True)\n"


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = package_env(tmp)
        data = synth_data(tmp / "synth", env, 32, 4, 96)
        project = tmp / "runs"
        fit = FIT.format(data=str(data), project=str(project))
        r = subprocess.run([str(PACKAGE_PYTHON), "-c", fit, "a"], env=env, capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0:
            sys.exit(f"the uninterrupted fit failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        proc = subprocess.Popen([str(PACKAGE_PYTHON), "-c", fit, "c"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=tmp)
        interrupted_at, output = None, []
        for line in proc.stdout:
            output.append(line)
            if interrupted_at is None and line.lstrip().startswith("2/3") and "%" in line:
                proc.send_signal(signal.SIGINT)
                interrupted_at = line.strip()
        proc.wait()
        text = "".join(output)
        check(interrupted_at is not None, f"SIGINT sent during epoch 2: {str(interrupted_at)[:50]}...")
        check(proc.returncode == 3 and "KeyboardInterrupt caught" in text,
              f"train() raised KeyboardInterrupt (exit {proc.returncode})")
        last = project / "c" / "weights" / "last.safetensors"
        check(last.exists() and checkpoint_state(last)["epoch"] == 1, "weights/last.safetensors kept, at epoch 1")
        r = subprocess.run([str(PACKAGE_PYTHON), "-c", RESUME, str(last)], env=env, capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0:
            sys.exit(f"the resume failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}\n--- interrupted run:\n{text[-2000:]}")
        a, c = project / "a", project / "c"
        for f in ["weights/last.safetensors", "weights/best.safetensors", "step_losses.f32"]:
            check(digest(a / f) == digest(c / f), f"resumed vs uninterrupted: {f} equal")
        check(results_without_time(a) == results_without_time(c), "resumed vs uninterrupted: results.csv (but time) equal")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
