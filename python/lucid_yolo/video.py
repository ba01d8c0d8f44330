"""Video files from Python without OpenCV (the package does not depend on it): a Motion JPEG AVI
writer, the container and codec of ``lucid predict``'s and the reference's saved videos on Linux,
and the frame rate a video file declares.

The writer keeps one frame at a time. Up to 1 GiB it writes a plain AVI (RIFF 'AVI ' with an idx1
index); a larger video continues in further RIFF 'AVIX' parts with OpenDML's two-level index (a
super index in the stream header pointing at each part's ix00 chunk), as FFmpeg's AVI writer does,
so that the 32-bit sizes and offsets stay within each part."""
import re
import struct
from pathlib import Path

PART = 1 << 30  # bytes of one RIFF part
PARTS = 256  # RIFF parts the super index has room for (256 GiB)
KEYFRAME = 0x10  # idx1's AVIIF_KEYFRAME: every Motion JPEG frame stands alone
HAS_INDEX = 0x10  # avih's AVIF_HASINDEX


def _chunk(fourcc, data):
    """A RIFF chunk: id, size, data padded to an even length (the padding not counted)."""
    return fourcc + struct.pack("<I", len(data)) + data + b"\0" * (len(data) & 1)


def _list(kind, body):
    return _chunk(b"LIST", kind + body)


class MjpegAviWriter:
    """Frames (JPEG bytes, all width x height) into ``path``: written to ``path.part`` and renamed by
    close(), so an interrupted run leaves no half-written video under the final name."""

    def __init__(self, path, width, height, fps, part_size=PART, parts=PARTS):
        self.path = Path(path)
        self.temp = self.path.with_name(self.path.name + ".part")
        self.width, self.height, self.fps = int(width), int(height), max(1, int(fps))
        self.part_size, self.max_parts = part_size, parts
        self.frames = self.biggest = 0
        self.parts = []  # per closed RIFF part: (ix00 offset, ix00 chunk size, frames)
        self.first_frames = 0  # frames of the first part (the plain AVI's own count)
        self.file = open(self.temp, "wb")
        self._open_part()

    def _headers(self):
        """The first part's RIFF and hdrl headers (OpenDML's odml list inside hdrl); the same length
        whatever the counts, so that close() rewrites them in place."""
        w, h, fps, big = self.width, self.height, self.fps, self.biggest
        rate = min(big * fps, 0xFFFFFFFF)  # bytes per second at most
        avih = struct.pack("<14I", round(1e6 / fps), rate, 0, HAS_INDEX, self.first_frames, 0, 1, big, w, h, 0, 0, 0, 0)
        strh = struct.pack("<4s4sIHHIIIIIIiI4h", b"vids", b"MJPG", 0, 0, 0, 0, 1, fps, 0, self.frames, big, -1, 0,
                           0, 0, w, h)
        strf = struct.pack("<IiiHH4sIiiII", 40, w, h, 1, 24, b"MJPG", w * h * 3, 0, 0, 0, 0)
        entries = b"".join(struct.pack("<QII", *p) for p in self.parts).ljust(16 * self.max_parts, b"\0")
        indx = struct.pack("<HBBI4s3I", 4, 0, 0, len(self.parts), b"00dc", 0, 0, 0) + entries
        strl = _list(b"strl", _chunk(b"strh", strh) + _chunk(b"strf", strf) + _chunk(b"indx", indx))
        odml = _list(b"odml", _chunk(b"dmlh", struct.pack("<I", self.frames).ljust(248, b"\0")))
        return b"RIFF\0\0\0\0AVI " + _list(b"hdrl", _chunk(b"avih", avih) + strl + odml)

    def _open_part(self):
        self.riff = self.file.tell()
        self.file.write(self._headers() if self.riff == 0 else b"RIFF\0\0\0\0AVIX")
        self.movi = self.file.tell()
        self.file.write(b"LIST\0\0\0\0movi")
        self.index = []  # this part's frames: (data offset in the file, size)

    def write(self, jpeg):
        """Appends one frame (a JPEG file's bytes)."""
        jpeg = bytes(jpeg)
        n = len(self.index) + 1
        indexes = 32 + 8 * n + (8 + 16 * n if self.riff == 0 else 0)  # this part's ix00 (and idx1) to come
        if self.index and self.file.tell() - self.riff + 9 + len(jpeg) + indexes > self.part_size:
            if len(self.parts) + 1 == self.max_parts:  # refused before the part closes: close() keeps it whole
                raise ValueError(f"{self.path}: the video passes {self.max_parts} RIFF parts of "
                                 f"{self.part_size} bytes, the most its index has room for")
            self._close_part()
            self._open_part()
        self.index.append((self.file.tell() + 8, len(jpeg)))
        self.file.write(_chunk(b"00dc", jpeg))
        self.frames += 1
        self.biggest = max(self.biggest, len(jpeg))

    def _close_part(self):
        """Ends the part's movi list with its ix00 (offsets from the part's start), and the first part
        with the plain AVI's idx1 (offsets from the movi list's id)."""
        f = self.file
        entries = b"".join(struct.pack("<II", pos - self.riff, size) for pos, size in self.index)
        ix = struct.pack("<HBBI4sQI", 2, 0, 1, len(self.index), b"00dc", self.riff, 0) + entries
        self.parts.append((f.tell(), 8 + len(ix), len(self.index)))
        f.write(_chunk(b"ix00", ix))
        movi_end = f.tell()
        if self.riff == 0:
            self.first_frames = len(self.index)
            f.write(_chunk(b"idx1", b"".join(struct.pack("<4sIII", b"00dc", KEYFRAME, pos - 8 - (self.movi + 8), size)
                                             for pos, size in self.index)))
        end = f.tell()
        f.seek(self.movi + 4)
        f.write(struct.pack("<I", movi_end - self.movi - 8))
        f.seek(self.riff + 4)
        f.write(struct.pack("<I", end - self.riff - 8))
        f.seek(end)

    def close(self):
        """Completes the indexes and headers and renames the file to ``path``."""
        if self.file.closed:
            return
        self._close_part()
        self.file.seek(8)  # after the RIFF size, which _close_part wrote
        self.file.write(self._headers()[8:])
        self.file.close()
        self.temp.replace(self.path)


def video_fps(path):
    """The frame rate a video file declares, 0.0 when unknown: an AVI's video stream header, an MP4
    or MOV video track's sample timing (frames / duration, FFmpeg's average rate), else OpenCV's
    reading of other containers where it is installed."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if head[:4] == b"RIFF" and head[8:] == b"AVI ":
                found = re.search(rb"strh.{4}vids", f.read(1 << 16), re.S)  # within the hdrl list
                if not found:
                    return 0.0
                scale, rate = struct.unpack_from("<II", found.string, found.start() + 28)
                return rate / scale if scale else 0.0
            if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):
                return _mp4_fps(f)
    except (OSError, struct.error):
        return 0.0
    try:
        import cv2
    except ImportError:
        return 0.0
    capture = cv2.VideoCapture(str(path))
    fps = capture.get(cv2.CAP_PROP_FPS) if capture.isOpened() else 0.0
    capture.release()
    return float(fps or 0.0)


def _boxes(data, start, end):
    """(type, payload start, end) of the ISO media boxes in data[start:end]."""
    while start + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, start)
        head = 8
        if size == 1:
            size, head = struct.unpack_from(">Q", data, start + 8)[0], 16
        elif size == 0:  # to the end
            size = end - start
        if size < head:
            return
        yield kind, start + head, min(start + size, end)
        start += size


def _child(data, span, *path):
    """The payload span of the first box along path (types) inside span, or None."""
    for kind in path:
        span = next(((a, b) for k, a, b in _boxes(data, *span) if k == kind), None)
        if span is None:
            return None
    return span


def _mp4_fps(f):
    """The first video track's frames / duration from the moov box (read whole; it sits at either
    end of the file)."""
    f.seek(0, 2)
    size, pos = f.tell(), 0
    while pos + 8 <= size:
        f.seek(pos)
        header = f.read(16)
        length, kind = struct.unpack_from(">I4s", header)
        head = 8
        if length == 1:
            length, head = struct.unpack_from(">Q", header, 8)[0], 16
        elif length == 0:
            length = size - pos
        if length < head:
            return 0.0
        if kind == b"moov":
            f.seek(pos + head)
            moov = f.read(length - head)
            for k, a, b in _boxes(moov, 0, len(moov)):
                fps = _track_fps(moov, (a, b)) if k == b"trak" else 0.0
                if fps:
                    return fps
            return 0.0
        pos += length
    return 0.0


def _track_fps(data, trak):
    hdlr, mdhd = _child(data, trak, b"mdia", b"hdlr"), _child(data, trak, b"mdia", b"mdhd")
    stts = _child(data, trak, b"mdia", b"minf", b"stbl", b"stts")
    if not (hdlr and mdhd and stts) or data[hdlr[0] + 8:hdlr[0] + 12] != b"vide":
        return 0.0
    timescale = struct.unpack_from(">I", data, mdhd[0] + (20 if data[mdhd[0]] == 1 else 12))[0]
    count = struct.unpack_from(">I", data, stts[0] + 4)[0]
    runs = struct.unpack_from(f">{2 * count}I", data, stts[0] + 8)
    frames, duration = sum(runs[0::2]), sum(n * d for n, d in zip(runs[0::2], runs[1::2]))
    return timescale * frames / duration if duration else 0.0
