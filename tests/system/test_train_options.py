"""The train options beyond the basics, end to end on a tiny synthetic set (CPU): a cfg file with
the command line over it; rect, multi_scale, fraction, single_cls, cls_pw, mask_ratio, split and
save_json in one short fit (same seed: same bytes twice; the options recorded in args.yaml); a
timed fit that stops on its time; batch=-1 on the CPU takes the reference's 16 with a warning;
kernel_times= on the CPU is refused."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, digest, failures, lucid, results_without_time, synth_data, train  # noqa: E402

BASE = ["imgsz=64", "workers=2", "device=cpu", "plots=False"]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "LUCID_CACHE_DIR": str(tmp / "cache")}
        data = synth_data(tmp / "synth", env, 12, 4, 64)
        cfg = tmp / "opts.yaml"
        cfg.write_text(f"data: {data}\nepochs: 5\nbatch: 4\nrect: true\nmulti_scale: 0.5\nfraction: 0.67\n"
                       "single_cls: true\ncls_pw: 0.5\nmask_ratio: 2\nsave_json: true\nclose_mosaic: 0\n")
        runs = []
        for name in ("a", "b"):
            out = train([*BASE, f"cfg={cfg}", "epochs=2"], env, tmp / "runs", name)
            runs.append(tmp / "runs" / name)
        a, b = runs
        args = (a / "args.yaml").read_text()
        check("epochs: '2'" in args or "epochs: 2" in args, "the command line's epochs=2 wins over the file's 5")
        for key in ("rect", "multi_scale", "fraction", "single_cls", "cls_pw", "mask_ratio", "save_json"):
            check(key in args, f"args.yaml records {key}")
        check(len(results_without_time(a)) == 3, "2 epochs trained (results.csv: header and 2 rows)")
        check("Class weights: [1.000]" in out, "cls_pw prints the class weights (one class with single_cls)")
        check((a / "predictions.json").exists(), "save_json=True: the final validation writes predictions.json")
        check(results_without_time(a) == results_without_time(b), "same seed: the same results")
        check(digest(a / "weights" / "last.safetensors") == digest(b / "weights" / "last.safetensors"),
              "same seed: the same last checkpoint bytes")

        # time: a budget far below one epoch stops after the first optimizer step past it.
        out = train([*BASE, f"data={data}", "epochs=50", "batch=4", "time=0.000001"], env, tmp / "runs", "timed")
        rows = results_without_time(tmp / "runs" / "timed")
        check(len(rows) == 2, f"time=0.000001: one epoch trained and recorded ({len(rows) - 1})")
        check("Starting training for 1e-06 hours" in out, "the timed start line names the hours")
        timed_args = (tmp / "runs" / "timed" / "args.yaml").read_text().splitlines()
        check("epochs: 1" in timed_args and "time: 1e-06" in timed_args,
              "a timed fit's args.yaml records the epochs it trained and its time")
        r = lucid(["train", *BASE, f"data={data}", "epochs=1", "batch=-1", "fraction=4", f"project={tmp / 'runs'}",
                   "name=auto"], env)
        check("using default batch-size 16" in r.stderr, "batch=-1 on the CPU: the reference's default 16, warned")
        check("batch: '16'" in (tmp / "runs" / "auto" / "args.yaml").read_text() or
              "batch: 16" in (tmp / "runs" / "auto" / "args.yaml").read_text(), "args.yaml records the chosen batch")
        # 9 images in batches of 4 leave one image, which multi_scale may shrink to 32 px: refused.
        r = lucid(["train", *BASE, f"data={data}", "epochs=1", "batch=4", "fraction=9", "multi_scale=0.5",
                   f"project={tmp / 'runs'}", "name=bn"], env, expect=None)
        check(r.returncode != 0 and "option batch=4" in r.stderr and ">= 64" in r.stderr,
              "a final batch of one image at 32 px is refused naming batch")
        r = lucid(["train", *BASE, f"data={data}", "epochs=1", "split=test", f"project={tmp / 'runs'}", "name=t"], env,
                  expect=None)
        check(r.returncode != 0 and "option split=test" in r.stderr, "split=test without a test split names the option")
        r = lucid(["train", *BASE, f"data={data}", "epochs=1", "kernel_times=2", f"project={tmp / 'runs'}", "name=k"],
                  env, expect=None)
        check(r.returncode != 0 and "option kernel_times=2" in r.stderr and "Traceback" not in r.stderr,
              "kernel_times= on the CPU is refused naming the option")
        r = lucid(["train", *BASE, f"cfg={tmp / 'missing.yaml'}"], env, expect=None)
        check(r.returncode != 0 and "missing.yaml" in r.stderr, "a missing cfg file is an error naming it")
    if failures:
        sys.exit(f"{len(failures)} checks failed")


if __name__ == "__main__":
    main()
