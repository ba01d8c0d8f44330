"""Released weights and datasets by name (lucid_yolo/assets.py), against a local HTTP server standing in
for the reference's release host (LUCID_ASSETS_URL), with the settings' weights_dir and datasets_dir
in a temporary folder: YOLO("yolo26n-seg.pt") downloads the served .pt into weights_dir byte for byte
and a second YOLO(...) downloads nothing; a truncated response, a 404 and a server that is down are
one-line errors of the console script naming the file and the URL, with nothing left in weights_dir;
`lucid train data=coco8-seg.yaml` unpacks the served zip into datasets_dir/coco8-seg and trains an
epoch on it, and YOLO(...).val(data="coco8-seg.yaml") validates on it without downloading again; an
archive with a member outside its folder is refused; the `lucid` executable (no HTTP client) finds
the downloaded weights in weights_dir and names the URL for a name it does not have."""
import functools
import http.server
import io
import os
import socket
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lucid_runs import check, digest, failures, lucid, synth_data  # noqa: E402
from package_env import PACKAGE_PYTHON, package_env, require_package  # noqa: E402

RELEASE = "https://github.com/ultralytics/assets/releases/download"


class Server:
    """http.server on 127.0.0.1 in a thread, serving root; counts GETs by path; with truncate set, sends
    the full Content-Length and half the bytes, then closes."""

    def __init__(self, root):
        self.gets, self.truncate = {}, False
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                server.gets[self.path] = server.gets.get(self.path, 0) + 1
                file = Path(self.directory) / self.path.lstrip("/")
                if server.truncate and file.is_file():
                    data = file.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[:len(data) // 2])
                    self.close_connection = True
                    return
                super().do_GET()

            def log_message(self, *args):
                pass

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def released_pt(tmp, env):
    """A reference-format .pt of yolo26n-seg (80 classes, initial weights): lucid model save, then lucid
    export format=pt, which builds the reference's checkpoint with this test's Python."""
    weights = tmp / "init.safetensors"
    lucid(["model", "save", "model=yolo26n-seg.yaml", f"out={weights}"], env)
    lucid(["export", f"model={weights}", "format=pt", f"out={tmp / 'yolo26n-seg.pt'}"],
          dict(env, LUCID_PYTHON=sys.executable))
    return tmp / "yolo26n-seg.pt"


def dataset_zip(tmp, env, out):
    """A coco8-seg.zip of the reference's layout (one top-level coco8-seg/ with images/ and labels/
    train and val) from a small synthetic dataset."""
    data = synth_data(tmp / "synth", env, 8, 4, 64).parent
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(data.rglob("*")):
            if f.is_file() and f.parts[len(data.parts)] in ("images", "labels"):
                z.write(f, "coco8-seg/" + f.relative_to(data).as_posix())


def leftovers(folder):
    return sorted(p.name for p in Path(folder).rglob(".*")) if Path(folder).exists() else []


class Case:
    """The temporary folders, the served files, the server and the package runs of one test."""

    def __init__(self, tmp):
        self.tmp, self.env = tmp, package_env(tmp)
        self.env["LUCID_CONFIG_DIR"] = str(tmp / "config")
        self.env.pop("LUCID_ASSETS_URL", None)
        self.weights_dir, self.datasets_dir, self.work = tmp / "w", tmp / "d", tmp / "work"
        self.work.mkdir()
        lucid(["settings", f"weights_dir={self.weights_dir}", f"datasets_dir={self.datasets_dir}"], self.env)
        serve = tmp / "serve"
        (serve / "v8.4.0").mkdir(parents=True)
        (serve / "v0.0.0").mkdir()
        self.pt = released_pt(tmp, self.env)
        for name in ("yolo26n-seg.pt", "yolov8n-seg.pt"):
            (serve / "v8.4.0" / name).write_bytes(self.pt.read_bytes())
        dataset_zip(tmp, self.env, serve / "v0.0.0" / "coco8-seg.zip")
        evil = io.BytesIO()
        with zipfile.ZipFile(evil, "w") as z:
            z.writestr("evil/ok.txt", "fine")
            z.writestr("../escaped.txt", "outside")
        (serve / "v0.0.0" / "evil.zip").write_bytes(evil.getvalue())
        self.server = Server(serve)
        self.env["LUCID_ASSETS_URL"] = self.server.url

    def py(self, code):
        return subprocess.run([str(PACKAGE_PYTHON), "-c", code], env=self.env, cwd=self.work, capture_output=True,
                              text=True)

    def cli(self, *args, env=None):
        return subprocess.run([str(PACKAGE_PYTHON.parent / "lucid"), *map(str, args)], env=env or self.env,
                              cwd=self.work, capture_output=True, text=True)


def weights_by_name(c):
    """The first YOLO(name) downloads into weights_dir, the second finds the file there."""
    load = "from lucid_yolo import YOLO; m = YOLO('yolo26n-seg.pt'); print(m.ckpt_path, len(m.names))"
    r = c.py(load)
    got = c.weights_dir / "yolo26n-seg.pt"
    check(r.returncode == 0 and got.is_file() and digest(got) == digest(c.pt) and r.stdout.split() == [str(got), "80"],
          f"YOLO('yolo26n-seg.pt') downloads the served file into weights_dir: {r.stdout.strip()} {r.stderr[-600:]}")
    check(f"{c.server.url}/v8.4.0/yolo26n-seg.pt" in r.stderr, "the download says what it fetches from where")
    r = c.py(load)
    check(r.returncode == 0 and c.server.gets.get("/v8.4.0/yolo26n-seg.pt") == 1,
          f"a second YOLO('yolo26n-seg.pt') downloads nothing ({c.server.gets})")
    check(leftovers(c.weights_dir) == [], f"no temporary files in weights_dir: {leftovers(c.weights_dir)}")


def failed_downloads(c):
    """One line from the console script naming the file and the URL, nothing kept."""
    c.server.truncate = True
    r = c.cli("model", "info", "model=yolov8n-seg.pt")
    c.server.truncate = False
    check(r.returncode == 1 and "yolov8n-seg.pt" in r.stderr and "incomplete" in r.stderr and
          f"{c.server.url}/v8.4.0/yolov8n-seg.pt" in r.stderr and "Traceback" not in r.stderr,
          f"a truncated download is one clear error: {r.stderr.strip()[-400:]}")
    check(not (c.weights_dir / "yolov8n-seg.pt").exists() and leftovers(c.weights_dir) == [],
          f"nothing is left from the truncated download: {sorted(os.listdir(c.weights_dir))}")
    r = c.cli("model", "info", "model=yolo11m-seg.pt")
    check(r.returncode == 1 and "HTTP 404" in r.stderr and "yolo11m-seg.pt" in r.stderr and
          "Traceback" not in r.stderr, f"a missing asset is one clear error: {r.stderr.strip()[-300:]}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    r = c.cli("predict", "model=yolo11s-seg.pt", "source=x.jpg", env=dict(c.env, LUCID_ASSETS_URL=down))
    check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "unreachable" in r.stderr and
          f"{down}/v8.4.0/yolo11s-seg.pt" in r.stderr and "Traceback" not in r.stderr,
          f"a server that is down is one clear error: {r.stderr.strip()[-300:]}")
    r = c.py("from lucid_yolo import YOLO, LucidError\n"
             "try:\n    YOLO('yolo11s-seg.pt')\nexcept LucidError as e:\n"
             "    print(type(e).__name__, e.__cause__ is None and e.__suppress_context__)")
    check(r.stdout.strip() == "DownloadError True",
          f"from Python: a LucidError with urllib's chain suppressed ({r.stdout.strip()} {r.stderr[-300:]})")
    check(sorted(os.listdir(c.weights_dir)) == ["yolo26n-seg.pt"],
          f"weights_dir holds only the whole file: {os.listdir(c.weights_dir)}")


def dataset_by_name(c):
    """The zip unpacked into datasets_dir on first use, an epoch trained on it, then a val without a
    second download; an archive member outside its folder refuses the archive."""
    r = c.cli("train", "model=yolo26n-seg.pt", "data=coco8-seg.yaml", "epochs=1", "imgsz=64", "batch=4", "workers=0",
              "device=cpu", "plots=False", f"project={c.tmp / 'runs'}", "name=coco8")
    best = c.tmp / "runs" / "coco8" / "weights" / "best.safetensors"
    check(r.returncode == 0 and best.is_file() and (c.datasets_dir / "coco8-seg" / "images" / "val").is_dir(),
          f"lucid train data=coco8-seg.yaml unpacks the dataset into datasets_dir and trains: {r.stderr.strip()[-600:]}")
    check(leftovers(c.datasets_dir) == [], f"no temporary files in datasets_dir: {leftovers(c.datasets_dir)}")
    r = c.py(f"from lucid_yolo import YOLO; m = YOLO({str(best)!r}).val(data='coco8-seg.yaml', imgsz=64, "
             "batch=4, device='cpu', plots=False); print(m.seg.map50 >= 0)")
    check(r.returncode == 0 and r.stdout.strip().endswith("True") and c.server.gets.get("/v0.0.0/coco8-seg.zip") == 1,
          f"YOLO.val(data='coco8-seg.yaml') validates without a second download ({c.server.gets}) {r.stderr[-600:]}")
    unzip = c.tmp / "unzip"
    r = c.py(f"from lucid_yolo.assets import unpack_zip, RELEASES_URL, release_url\n"
             f"try:\n    unpack_zip(release_url(RELEASES_URL + '/v0.0.0/evil.zip'), {str(unzip)!r})\n"
             f"except Exception as e:\n    print(type(e).__name__, e)")
    check(r.stdout.startswith("DownloadError") and "../escaped.txt" in r.stdout and not (c.tmp / "escaped.txt").exists()
          and os.listdir(unzip) == [], f"zip-slip refused, nothing written: {r.stdout.strip()} {r.stderr[-300:]}")


def executable(c):
    """The `lucid` executable: weights_dir's copy found by name; for an absent name the URL."""
    r = lucid(["model", "info", "model=yolo26n-seg.pt"], c.env, expect=None, cwd=c.work)
    check(r.returncode == 0 and "summary" in r.stdout,
          f"lucid (executable) reads yolo26n-seg.pt from weights_dir: {r.stderr[-300:]}")
    r = lucid(["model", "info", "model=yolov8m-seg.pt"], c.env, expect=None, cwd=c.work)
    check(r.returncode == 1 and f"{RELEASE}/v8.4.0/yolov8m-seg.pt" in r.stderr and "lucid_yolo" in r.stderr,
          f"lucid (executable) names the URL of an absent released name: {r.stderr.strip()}")
    r = lucid(["val", "model=yolo26n-seg.pt", "data=coco128-seg.yaml"], c.env, expect=None, cwd=c.work)
    check(r.returncode == 1 and "cfg/datasets/coco128-seg.yaml" in r.stderr,
          f"lucid (executable) says where coco128-seg.yaml is: {r.stderr.strip()}")


def main():
    require_package()
    with tempfile.TemporaryDirectory() as tmp:
        c = Case(Path(tmp))
        try:
            weights_by_name(c)
            failed_downloads(c)
            dataset_by_name(c)
            executable(c)
        finally:
            c.server.httpd.shutdown()
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
