"""Released weights and datasets by name, as the reference resolves them (docs/python.md, "Weights and
datasets by name").

A weights name of the reference's released segmentation models (yolo26n-seg.pt ... yolov8x-seg.pt)
that is not a file here is taken from the settings' weights_dir, else downloaded there from the
reference's release. A dataset name lucid ships a YAML for (coco8-seg.yaml, coco128-seg.yaml,
coco-seg.yaml, in cfg/datasets) that is not a file here is that YAML, its download: zips unpacked
into the settings' datasets_dir on first use. LUCID_ASSETS_URL replaces the release host's base URL
(https://github.com/ultralytics/assets/releases/download) with a mirror laid out as TAG/FILE.

The reference publishes no checksums for these files: a download is checked against its
Content-Length and a minimum size, weights must be a zip archive (torch's format), and nothing is
put in place until it is whole (a temporary file or folder beside the target, then a rename)."""
import http.client
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from . import _lucid

RELEASES_URL = "https://github.com/ultralytics/assets/releases/download"
WEIGHTS_RELEASE = "v8.4.0"  # the reference 8.4.190's attempt_download_asset release
URL_ENV = "LUCID_ASSETS_URL"
WEIGHTS_NAME = re.compile(r"(yolo26|yolo11|yolov8)[nsmlx]-seg\.pt")
DATASETS_CFG = Path(__file__).resolve().parent / "cfg" / "datasets"
MIN_WEIGHTS_BYTES = 100_000  # the reference's min_bytes for assets: an error page is smaller
CHUNK = 1 << 20


class DownloadError(_lucid.LucidError):
    """A download or unpacking that failed; the message names the file and the URL."""


def release_url(url):
    """url with the release host's base replaced by $LUCID_ASSETS_URL where that is set."""
    mirror = os.environ.get(URL_ENV, "").rstrip("/")
    if mirror and url.startswith(RELEASES_URL + "/"):
        return mirror + url[len(RELEASES_URL):]
    return url


def is_weights_name(value):
    return WEIGHTS_NAME.fullmatch(str(value)) is not None


def is_dataset_name(value):
    value = str(value)
    return "/" not in value and (DATASETS_CFG / value).is_file()


def resolve_weights(model):
    """The file for model=: itself when it exists or is not a released name, else the copy in
    weights_dir, downloaded there first when there is none."""
    model = str(model)
    if not is_weights_name(model) or Path(model).exists():
        return model
    target = Path(_lucid.settings()["weights_dir"]) / model
    if not target.is_file():
        url = release_url(f"{RELEASES_URL}/{WEIGHTS_RELEASE}/{model}")
        download(url, target, MIN_WEIGHTS_BYTES, check=_check_torch_archive)
    return str(target)


def resolve_dataset(data):
    """The YAML for data=: itself when it exists or is not a shipped name, else lucid's YAML of that
    name, with its dataset unpacked into datasets_dir first when its splits are not there."""
    data = str(data)
    if Path(data).exists() or not is_dataset_name(data):
        return data
    yaml_file = DATASETS_CFG / data
    fields = read_dataset_fields(yaml_file)
    datasets_dir = Path(_lucid.settings()["datasets_dir"])
    root = Path(fields["path"])
    # Where the native reader looks for a relative path: (after the YAML's own folder, which is the
    # package's): the working folder, then datasets_dir.
    if not root.is_absolute() and not root.exists():
        root = datasets_dir / root
    if not all((root / fields[split]).exists() for split in ("train", "val")):
        for entry in fields["download"]:
            url, _, under = entry.partition(" ")
            unpack_zip(release_url(url), datasets_dir / under.strip())
    return str(yaml_file)


def read_dataset_fields(path):
    """path, train, val and download (a list of entries) of one of lucid's own dataset YAMLs: plain
    top-level `key: value` lines and `- item` lists, all these files use (no YAML parser needed)."""
    fields, key = {"download": []}, None
    for line in path.read_text().splitlines():
        text = line.split(" #")[0].rstrip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith(" "):
            key, _, value = text.partition(":")
            value = value.strip()
            if key == "download" and value:
                fields["download"].append(value)
            elif key in ("path", "train", "val"):
                fields[key] = value
        elif key == "download" and text.strip().startswith("- "):
            fields["download"].append(text.strip()[2:].strip())
    return fields


def download(url, target, min_bytes=1, check=None, shown=None, offline=None):
    """url into target (its folder created): a temporary file beside it, renamed into place once the
    received size equals Content-Length (where the server sends one) and is at least min_bytes and
    check(file) passed. Any failure is a DownloadError naming the file (shown, else target) and the
    URL; offline says what to do instead where the host is unreachable."""
    target = Path(target)
    shown = Path(shown or target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as e:
        raise DownloadError(f"{target}: cannot write in {target.parent} to download {url} there: {e}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            _receive(url, shown, out, min_bytes, offline or f"put the file at {target} yourself")
        if check:
            check(part, shown, url)
        os.replace(part, target)
    except OSError as e:
        raise DownloadError(f"{target}: downloading {url} failed: {e}") from None
    finally:
        if os.path.exists(part):
            os.unlink(part)


def _receive(url, target, out, min_bytes, offline):
    request = urllib.request.Request(url, headers={"User-Agent": f"lucid_yolo/{_lucid.version()}"})
    received, total = 0, None
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = _Progress(f"Downloading {url} to {target}", total)
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                received += len(chunk)
                bar.update(received)
            bar.close(received)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"{target.name}: download failed: HTTP {e.code} {e.reason} from {url}") from None
    except urllib.error.URLError as e:
        raise DownloadError(f"{target.name}: download failed, {url} unreachable ({e.reason}); offline? {offline}"
                            ) from None
    except (OSError, http.client.HTTPException) as e:
        raise DownloadError(f"{target.name}: download from {url} failed after {received} bytes "
                            f"({type(e).__name__}: {e})") from None
    if total is not None and received != total:
        raise DownloadError(f"{target.name}: download from {url} incomplete: {received} of {total} bytes "
                            f"(Content-Length); nothing was kept, try again")
    if received < min_bytes:
        raise DownloadError(f"{target.name}: download from {url} gave {received} bytes, less than the "
                            f"{min_bytes} such a file has; nothing was kept")


def _check_torch_archive(part, target, url):
    if not zipfile.is_zipfile(part):
        raise DownloadError(f"{target.name}: what {url} sent is not a PyTorch checkpoint (not a zip archive); "
                            f"nothing was kept")


class _Progress:
    """A one-line progress bar on a terminal (stderr); elsewhere only the start and end lines."""

    def __init__(self, what, total):
        self.what, self.total = what, total
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        size = f" ({_size(total)})" if total else " (size not sent)"
        print(what + size, file=sys.stderr, flush=True)

    def update(self, received):
        now = time.monotonic()
        if not self.tty or now - self.last < 0.2:
            return
        self.last = now
        if self.total:
            done = received / self.total
            bar = "#" * int(done * 30)
            text = f"\r  {bar:<30} {done:4.0%} {_size(received)} of {_size(self.total)}"
        else:
            text = f"\r  {_size(received)}"
        print(text, end="", file=sys.stderr, flush=True)

    def close(self, received):
        end = "\r" + " " * 60 + "\r" if self.tty else ""
        print(f"{end}  {_size(received)} received", file=sys.stderr, flush=True)


def _size(n):
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def unpack_zip(url, into):
    """The zip at url unpacked into the folder into, as the reference lays it out: a zip of one top-level
    folder gives into/FOLDER, any other into/STEM. Downloaded beside into and unpacked into a temporary
    folder there, then renamed into place; a destination that exists already is kept as it is. Members
    that would land outside into (absolute paths, '..') refuse the whole archive."""
    into = Path(into)
    stem = PurePosixPath(url.split("?")[0]).name
    zip_file = into / f".{stem}.{os.getpid()}.zip"
    # 22 bytes: the smallest zip, an empty one
    download(url, zip_file, 22, check=_check_zip, shown=into / stem, offline=f"unpack {stem} into {into} yourself")
    staging = None
    try:
        with zipfile.ZipFile(zip_file) as archive:
            members = archive.infolist()
            names = _safe_members(members, stem, url)
            tops = {PurePosixPath(n).parts[0] for n in names}
            one_folder = len(tops) == 1 and any(len(PurePosixPath(n).parts) > 1 or n.endswith("/") for n in names)
            dest = into / (next(iter(tops)) if one_folder else Path(stem).stem)
            if dest.exists():
                print(f"{dest} exists: kept, {stem} not unpacked over it", file=sys.stderr)
                return dest
            _check_space(members, into, stem, url)
            staging = Path(tempfile.mkdtemp(dir=into, prefix=f".{stem}.", suffix=".unpack"))
            print(f"Unpacking {stem} into {dest}", file=sys.stderr, flush=True)
            archive.extractall(staging)
        os.replace(staging / dest.name if one_folder else staging, dest)
        return dest
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise DownloadError(f"{stem}: unpacking {url} into {into} failed ({type(e).__name__}: {e})") from None
    finally:
        zip_file.unlink(missing_ok=True)
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _check_zip(part, target, url):
    if not zipfile.is_zipfile(part):
        raise DownloadError(f"{target.name}: what {url} sent is not a zip archive; nothing was kept")


def _safe_members(members, name, url):
    """The members' names, or a DownloadError for one that would be written outside the folder."""
    names = []
    for m in members:
        path = PurePosixPath(m.filename.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", m.filename) or not path.parts:
            raise DownloadError(f"{name}: the archive from {url} holds {m.filename!r}, outside the folder it "
                                f"unpacks into; nothing was unpacked")
        names.append(m.filename)
    if not names:
        raise DownloadError(f"{name}: the archive from {url} is empty")
    return names


def _check_space(members, into, stem, url):
    need = sum(m.file_size for m in members)
    free = shutil.disk_usage(into).free
    if need > free:
        raise DownloadError(f"{stem}: {url} unpacks to {need / 1e9:.2f} GB, {into} has {free / 1e9:.2f} GB free")
