"""PNG files of every colour type and bit depth the format allows (gray 1/2/4/8/16, RGB 8/16,
palette 1/2/4/8, gray+alpha and RGBA 8/16), with and without a tRNS (transparency) chunk and
Adam7 interlacing, written byte by byte so that no encoder's choices hide a case."""
import struct
import zlib

import numpy as np

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _scanlines(samples, depth):
    """samples (h, w, c) integers -> scanlines with filter type 0, samples packed MSB first."""
    out = bytearray()
    for row in samples.reshape(samples.shape[0], -1):
        if depth == 16:
            raw = row.astype(">u2").tobytes()
        elif depth == 8:
            raw = row.astype(np.uint8).tobytes()
        else:
            per = 8 // depth
            vals = list(row) + [0] * ((-len(row)) % per)
            raw = bytes(sum(int(v) << (8 - depth * (k + 1)) for k, v in enumerate(vals[i:i + per]))
                        for i in range(0, len(vals), per))
        out += b"\0" + raw
    return bytes(out)


def make_png(samples, color_type, depth, palette=None, trns=None, interlace=False):
    if samples.ndim == 2:
        samples = samples[..., None]
    h, w = samples.shape[:2]
    if interlace:
        data = b"".join(_scanlines(samples[y0::dy, x0::dx], depth) for x0, y0, dx, dy in ADAM7
                        if samples[y0::dy, x0::dx].size)
    else:
        data = _scanlines(samples, depth)
    png = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if palette is not None:
        png += _chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    if trns is not None:
        png += _chunk(b"tRNS", trns)
    return png + _chunk(b"IDAT", zlib.compress(data)) + _chunk(b"IEND", b"")


def png_cases(h=13, w=17, seed=0):
    """name -> PNG bytes, for every colour type, depth, tRNS and interlacing."""
    rng = np.random.default_rng(seed)
    cases = {}
    for depth in (1, 2, 4, 8, 16):
        g = rng.integers(0, 2 ** depth, (h, w))
        cases[f"gray{depth}"] = (g, 0, depth, None, None)
        cases[f"gray{depth}_trns"] = (g, 0, depth, None, struct.pack(">H", int(g[0, 0])))
    for depth in (8, 16):
        cases[f"rgb{depth}"] = (rng.integers(0, 2 ** depth, (h, w, 3)), 2, depth, None, None)
        cases[f"rgb{depth}_trns"] = (rng.integers(0, 2 ** depth, (h, w, 3)), 2, depth, None, struct.pack(">HHH", 1, 2, 3))
        cases[f"gray_alpha{depth}"] = (rng.integers(0, 2 ** depth, (h, w, 2)), 4, depth, None, None)
        cases[f"rgba{depth}"] = (rng.integers(0, 2 ** depth, (h, w, 4)), 6, depth, None, None)
    for depth in (1, 2, 4, 8):
        n = 2 ** depth
        palette, index = rng.integers(0, 256, (n, 3)), rng.integers(0, n, (h, w))
        cases[f"palette{depth}"] = (index, 3, depth, palette, None)
        cases[f"palette{depth}_trns"] = (index, 3, depth, palette, bytes(rng.integers(0, 256, n // 2 + 1).astype(np.uint8)))
    return {f"{name}{'_interlaced' if il else ''}": make_png(*case, interlace=il)
            for name, case in cases.items() for il in (False, True)}
