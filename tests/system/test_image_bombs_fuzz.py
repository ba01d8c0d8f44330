"""Images that declare more than they hold, given to `lucid predict` (random weights of
yolo26n-seg.yaml, imgsz 64, CPU) under an address-space cap (ulimit -v: 3 GiB, or 6 or 12 GiB where the
build's libraries need more for an ordinary run), each within 60 s at a resident peak under 1 GiB:

- drawing: a 32768x1 PNG (cairo's surfaces end at 32767 px a side) next to an ordinary image: exit 0,
  both drawn, the wide one at the reduced scale;
- PNG chunks: tEXt, zTXt, iTXt, sPLT and iCCP chunks declaring 2^31-1 bytes in files of about a hundred
  bytes (each decode used to allocate and clear 2 GB; run with 3 GiB more room, which that allocation
  needs to show): exit 1, one error line naming the file;
  complete images carrying a zTXt or iCCP zlib bomb (inflating to 256 MiB) or 100,000 text chunks:
  exit 0;
- pixel-cap bombs: 16-bit RGBA, 16-bit gray and interlaced PNGs declaring up to 16000x16000 (under
  the 2^28-pixel cap) in under a hundred bytes: exit 1 naming the file; a complete 16-bit 8192x8192
  RGBA PNG (522 kB, as in the report; 1 GiB more room for its drawing): exit 0, decoded and drawn (its drawing peaked at 1062 MiB when
  saving made an RGB copy of the whole surface, 870 MiB now);
- all of them in one folder: exit 0, every image the run can read drawn.

LUCID_FUZZ_SEED picks the sizes, keywords and chunk kinds (default 31)."""
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import LUCID, check, failures, lucid  # noqa: E402

CAPS = [3 << 30, 6 << 30, 12 << 30]
PEAK_LIMIT = 1 << 30
CHUNK_ROOM = 3 << 30  # the cap's raise for files whose chunk declares 2^31-1 bytes
DRAWING_ROOM = 1 << 30  # and for drawing the 8192x8192 image (its surface's address space over model info's)
TIMEOUT = 60
LIBRARY_WORDS = ("out of memory", "bad_alloc", "std::", "vector::", "terminate called", "enforce fail")
PREDICT = ["device=cpu", "imgsz=64", "conf=0.25", "max_det=10"]
cap = CAPS[0]


def run_capped(args, env, extra=0):
    """(exit code, negative for a signal; stderr; peak RSS bytes) of one lucid command under the cap
    (raised by extra bytes)."""
    limit = cap + extra
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([str(LUCID), *map(str, args)], env=env, stdout=subprocess.DEVNULL, stderr=err,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
        timer = threading.Timer(TIMEOUT, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage: its peak resident size
        timer.cancel()
        err.seek(0)
        return os.waitstatus_to_exitcode(status), err.read().decode(errors="replace"), usage.ru_maxrss * 1024


def chunk(kind, data, declared=None):
    return (struct.pack(">I", len(data) if declared is None else declared) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def ihdr(w, h, depth=8, color_type=2, interlace=0):
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, interlace))


def zeros_deflated(n):
    """n zero bytes deflated, fed in pieces (n may be hundreds of MiB)."""
    c = zlib.compressobj(9)
    piece = bytes(1 << 20)
    out = [c.compress(piece) for _ in range(n >> 20)]
    out.append(c.compress(bytes(n & ((1 << 20) - 1))))
    out.append(c.flush())
    return b"".join(out)


def png(w, h, depth=8, color_type=2, extra=b""):
    """A complete non-interlaced PNG of zero rows, `extra` chunks before its IDAT."""
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color_type]
    raw = h * (1 + (w * channels * depth + 7) // 8)
    return ihdr(w, h, depth, color_type) + extra + chunk(b"IDAT", zeros_deflated(raw)) + chunk(b"IEND", b"")


def hostile_files(folder, rng):
    """{name: (bytes, decodable)}: the files above, their sizes and keywords drawn from rng."""
    files = {}
    keyword = rng.choice([b"Comment", b"Description", b"XML:com.adobe.xmp", b"Raw profile type exif"])
    for kind in (b"tEXt", b"zTXt", b"iTXt", b"sPLT", b"iCCP"):
        body = keyword + b"\0" + bytes(rng.randrange(8, 40))
        files[f"len_{kind.decode()}.png"] = (ihdr(1, 1) + struct.pack(">I", 0x7FFFFFFF) + kind + body, False)
    bomb = zeros_deflated(256 << 20)
    files["ztxt_bomb.png"] = (png(8, 8, extra=chunk(b"zTXt", keyword + b"\0\0" + bomb)), True)
    files["iccp_bomb.png"] = (png(8, 8, extra=chunk(b"iCCP", b"icc\0\0" + bomb)), True)
    many = b"".join(chunk(b"tEXt", keyword + b"\0" + str(i).encode()) for i in range(100000))
    files["many_chunks.png"] = (png(8, 8, extra=many), True)
    for name, depth, color_type, interlace in (("rgba16", 16, 6, 0), ("gray16", 16, 0, 0), ("adam7", 8, 2, 1)):
        w, h = rng.randrange(12000, 16385), rng.randrange(12000, 16385)
        data = chunk(b"IDAT", zlib.compress(bytes(rng.randrange(1000, 20000)), 9))
        files[f"{name}_{w}x{h}.png"] = (ihdr(w, h, depth, color_type, interlace) + data + chunk(b"IEND", b""), False)
    files["deep_8192.png"] = (png(8192, 8192, 16, 6), True)
    for name, (data, _) in files.items():
        (folder / name).write_bytes(data)
    return files


def clean_refusal(code, err, path):
    lines = err.strip().splitlines()
    last = lines[-1] if lines else ""
    return (code == 1 and last.startswith("lucid ") and ": error: " in last and str(path) in last and
            not any(w in last for w in LIBRARY_WORDS)), last


def main():
    seed = int(os.environ.get("LUCID_FUZZ_SEED", "31"))
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, LUCID_CACHE_DIR=str(tmp / "cache"))
        global cap
        for cap in CAPS:
            code, err, peak = run_capped(["model", "info", "model=yolo26n-seg.yaml"], env)
            if code == 0:
                break
        else:
            sys.exit(f"lucid model info does not run under ulimit -v {CAPS[-1]}: {err[-500:]}")
        print(f"seed {seed}; ulimit -v {cap >> 20} MiB; an ordinary model info peaks at {peak >> 20} MiB", flush=True)
        weights = tmp / "w.safetensors"
        lucid(["model", "save", "model=yolo26n-seg.yaml", f"out={weights}"], env)
        base = ["predict", f"model={weights}", *PREDICT, f"project={tmp / 'runs'}"]

        # Drawing beyond cairo's side limit, in a folder with an ordinary image.
        wide = tmp / "wide"
        wide.mkdir()
        (wide / "wide.png").write_bytes(png(32768, 1))
        (wide / "normal.png").write_bytes(png(96, 64))
        code, err, peak = run_capped([*base, f"source={wide}", "name=wide"], env)
        drawn = sorted(p.name for p in (tmp / "runs" / "wide").glob("*.png"))
        check(code == 0 and drawn == ["normal.png", "wide.png"] and peak < PEAK_LIMIT,
              f"a folder holding a 32768x1 PNG: exit {code}, drawn {drawn}, peak {peak >> 20} MiB: "
              f"{err.strip()[-200:]}")

        # Each hostile file alone: refused with one line naming it, or predicted, within the cap.
        folder = tmp / "bombs"
        folder.mkdir()
        files = hostile_files(folder, rng)
        for name, (data, decodable) in files.items():
            path = folder / name
            # Under the bare cap a 2 GiB allocation fails and libpng reads on, which hides what it
            # costs: the chunk-length files get room for it, so that the peak shows it if it happens.
            extra = CHUNK_ROOM if name.startswith("len_") else DRAWING_ROOM if name.startswith("deep_") else 0
            code, err, peak = run_capped([*base, f"source={path}", f"name={path.stem}"], env, extra)
            if decodable:
                ok, last = code == 0, err.strip()[-200:]
            else:
                ok, last = clean_refusal(code, err, path)
            check(ok and peak < PEAK_LIMIT, f"{name} ({len(data)} bytes, {'decodable' if decodable else 'refused'}): "
                  f"exit {code}, peak {peak >> 20} MiB: {last[-200:]}")

        # All of them in one folder with an ordinary image: the run goes on past each refusal.
        (folder / "normal.png").write_bytes(png(96, 64))
        code, err, peak = run_capped([*base, f"source={folder}", "name=folder"], env, DRAWING_ROOM)
        drawn = {p.name for p in (tmp / "runs" / "folder").glob("*.png")}
        want = {n for n, (_, decodable) in files.items() if decodable} | {"normal.png"}
        check(code == 0 and drawn == want and peak < PEAK_LIMIT,
              f"one folder of them all: exit {code}, drawn {sorted(drawn)}, peak {peak >> 20} MiB")
    if failures:
        sys.exit(f"{len(failures)} image checks failed")


if __name__ == "__main__":
    main()
