"""Bad input at the command line, end to end (CPU): every case ends in one line naming the option,
file or line at fault (never a library's internals such as std::bad_alloc, stoi, [json.exception...],
vector::_M_range_insert or basic_filebuf::underflow, never a signal), or in a warning and a count
where the rest of the work can go on:
- options: non-finite numbers (degrees=inf, lr0=nan, conf=nan for predict and val), integers out of
  range (imgsz=100000), freeze=1,x; workers=100000 is capped with a line saying so;
  LUCID_DEPTHWISE_KERNELS=yes in the environment;
- patience=0 trains every epoch (the reference: no early stopping);
- data= an image, nc: 1e12, a model YAML row `Conv []`, coco-eval gt= a folder;
- data check: a folder with a link loop and a corrupt image is reported and counted; a split with no
  labels gets "No labels found"; COCO file_name values outside the image folder are skipped unless
  allow_outside_images=True;
- predict on a folder holding x.jpg, x.png and an unreadable image: distinct labels/ files and
  image_ids for the two x's, the bad one a warning and a count."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, train  # noqa: E402

LEAKS = ["bad_alloc", "stoi", "stoll", "json.exception", "_M_range_insert", "basic_filebuf", "terminate", "what()"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def lucid(args, env):
    return subprocess.run([str(LUCID), *map(str, args)], env=env, capture_output=True, text=True, timeout=600)


def expect_error(args, env, *parts):
    """Exit 1 with one line on stderr that holds every part and no library internals."""
    r = lucid(args, env)
    err = r.stderr.strip()
    ok = (r.returncode == 1 and len(err.splitlines()) == 1 and all(p in err for p in parts)
          and not any(leak in err for leak in LEAKS))
    check(ok, f"lucid {' '.join(map(str, args))[:80]} -> rc {r.returncode}: {err[:300]}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        project = tmp / "runs"
        for opt in ["degrees=inf", "lr0=nan", "imgsz=100000", "freeze=1,x", "batch=99999999999999999999"]:
            expect_error(["train", opt, "device=cpu", f"project={project}"], env, opt.split("=")[0] + "=")
        # A typo gets the nearest key; the reference's task word is accepted before the command.
        expect_error(["segment", "train", "imgz=64", "device=cpu", f"project={project}"], env,
                     "'imgz' is not a valid option; did you mean imgsz?")
        expect_error(["segment", "predict", "sorce=x.jpg"], env, "did you mean source?")
        # The depthwise kernels' switch (model/depthwise.h) is checked in every build, CPU included.
        expect_error(["train", "epochs=1", "imgsz=64", "device=cpu", f"project={project}"],
                     dict(env, LUCID_DEPTHWISE_KERNELS="yes"), "LUCID_DEPTHWISE_KERNELS=yes",
                     "expected 1 (on) or 0 (off)")

        # One short fit: patience=0 must not stop after epoch 1; workers beyond the CPUs are capped.
        out = train(["epochs=2", "imgsz=64", "batch=8", "workers=100000", "patience=0", "plots=False", "device=cpu"],
                    env, project, "t")
        rows = (project / "t" / "results.csv").read_text().splitlines()[1:]
        check(len(rows) == 2 and "Stopping early" not in out, f"patience=0 trains both epochs ({len(rows)} rows)")
        check("workers=100000 capped at" in out, "workers=100000 is capped with a line saying so")
        best = project / "t" / "weights" / "best.safetensors"
        expect_error(["predict", f"model={best}", "source=x.jpg", "conf=nan"], env, "conf=nan")
        expect_error(["val", f"model={best}", "conf=nan"], env, "conf=nan")
        expect_error(["val", f"model={best}", "imgsz=100000"], env, "imgsz=100000")

        synth = tmp / "cache" / "synth-v1"
        val_images = sorted((synth / "images" / "val").glob("*.jpg"))
        image = val_images[0]
        expect_error(["data", "check", f"data={image}"], env, str(image), "is an image")
        (tmp / "nc.yaml").write_text(f"train: {synth / 'images' / 'val'}\nval: {synth / 'images' / 'val'}\nnc: 1e12\n")
        expect_error(["data", "check", f"data={tmp / 'nc.yaml'}"], env, "nc.yaml:3", "nc must be")
        (tmp / "conv.yaml").write_text("nc: 3\nbackbone:\n  - [-1, 1, Conv, []]\nhead: []\n")
        expect_error(["model", "info", f"model={tmp / 'conv.yaml'}"], env, "conv.yaml:3", "Conv")
        (tmp / "gtdir").mkdir()
        expect_error(["coco-eval", f"gt={tmp / 'gtdir'}", f"dt={tmp / 'gtdir'}"], env, "gtdir", "is a folder")

        # data check: a link loop and a corrupt image among good ones, no labels at all.
        ds = tmp / "loop"
        (ds / "images" / "sub").mkdir(parents=True)
        for im in val_images[:3]:
            shutil.copy(im, ds / "images" / im.name)
        (ds / "images" / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
        os.symlink(ds / "images", ds / "images" / "sub" / "back")
        os.symlink(ds / "images" / "self.jpg", ds / "images" / "self.jpg")
        (ds / "data.yaml").write_text("train: images\nval: images\nnames: [a, b, c]\n")
        r = lucid(["data", "check", f"data={ds / 'data.yaml'}"], env)
        check(r.returncode == 0 and "3 images" in r.stdout and "3 skipped files" in r.stdout,
              f"data check goes on past a link loop, a self-link and a corrupt image: {r.stdout[-400:]} {r.stderr[-300:]}")
        check("a link to a folder already listed" in r.stdout and "bad.jpg" in r.stdout and "self.jpg" in r.stdout,
              "each skipped entry is a warning naming it")
        check("No labels found" in r.stdout, "a split without any label is warned about")

        # COCO file_name outside the image folder: skipped, unless allowed.
        gt = json.loads((synth / "annotations" / "instances_val.json").read_text())
        gt["images"][0]["file_name"] = "../val/" + gt["images"][0]["file_name"]
        (tmp / "escape.json").write_text(json.dumps(gt))
        base = ["data", "check", f"data={tmp / 'escape.json'}", f"images={synth / 'images' / 'val'}"]
        r = lucid(base, env)
        check(r.returncode == 0 and "leads outside the image folder" in r.stdout and "1 skipped files" in r.stdout,
              f"a COCO file_name with .. is skipped with a warning: {r.stdout[-300:]}")
        r = lucid(base + ["allow_outside_images=True"], env)
        check(r.returncode == 0 and "followed" in r.stdout and " 0 skipped files" in r.stdout,
              f"allow_outside_images=True follows it: {r.stdout[-300:]}")

        # predict: x.jpg and x.png in one folder, and an unreadable image.
        src = tmp / "src"
        src.mkdir()
        shutil.copy(image, src / "x.jpg")
        subprocess.run([sys.executable, "-c", f"from PIL import Image; Image.open('{image}').save('{src / 'x.png'}')"],
                       check=True)
        (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
        r = lucid(["predict", f"model={best}", f"source={src}", "imgsz=64", "conf=0", "device=cpu", "save=False",
                   "save_txt=True", "save_json=True", f"project={project}", "name=p"], env)
        labels = sorted(p.name for p in (project / "p" / "labels").glob("*.txt")) if r.returncode == 0 else []
        check(labels == ["x.jpg.txt", "x.png.txt"], f"one labels file per image: {labels} {r.stderr[-300:]}")
        ids = {p["image_id"] for p in json.loads((project / "p" / "predictions.json").read_text())} if r.returncode == 0 else set()
        check(ids == {"x.jpg", "x.png"}, f"distinct image ids: {ids}")
        check("broken.jpg" in r.stderr and "1 of 3 image files skipped" in r.stdout,
              f"the unreadable image is a warning and a count: {r.stderr.strip()[-200:]}")
    if failures:
        sys.exit(f"{len(failures)} failure(s):\n" + "\n".join(failures))
    print("all checks passed")


if __name__ == "__main__":
    main()
