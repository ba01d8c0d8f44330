"""The package's logger, ``logging.getLogger("lucid_yolo")`` (the reference's is "ultralytics"), and
the capture of the native commands' output into it.

The native code prints with printf and std::cout from many places (and its exporters run as child
processes writing to the same descriptor), so the capture is made where all of them meet: file
descriptor 1. While a command runs from the package, fd 1 is a pipe read by a thread that hands
each complete line to LOGGER.info; the default handler writes the record's bare message to the
current ``sys.stdout``, so the terminal shows what ``lucid`` prints, ``contextlib.redirect_stdout``
captures the lines, and ``logging`` handlers added to the logger receive them.

On a terminal the progress bars are still drawn: the native side is told that it writes to one
(util/progress.h), its redraws (text after a carriage return, before the line ends) go straight to
the terminal, and the finished line is logged. During the capture, Python's own writes to the
original stdout (print, handlers holding sys.stdout) go to the terminal, not into the pipe.
A child process that outlives its command (a W&B service) keeps writing into the pipe; its lines are
logged too. LUCID_LOG_CAPTURE=0 turns the capture off (the native output goes to fd 1 as from
``lucid``)."""
import contextlib
import ctypes
import logging
import os
import sys
import threading

from . import _lucid

LOGGER = logging.getLogger("lucid_yolo")


class StdoutHandler(logging.StreamHandler):
    """A StreamHandler writing to whatever sys.stdout is when a record is emitted."""

    def __init__(self):
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value):  # the handler always follows sys.stdout
        pass


def _set_up():
    if not LOGGER.handlers:
        handler = StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)
        LOGGER.propagate = False  # as the reference's logger: records stop at its handlers


_set_up()

_libc = ctypes.CDLL(None)
_depth = 0
_depth_lock = threading.Lock()
# One pipe for the process, read by one daemon thread for its lifetime: a child process started during
# a command (an exporter, a W&B service) may keep the pipe's write end open after the command ends, so
# the end of a command's output is a sentinel line written after it, never the pipe's end.
_pipe = None  # (read_fd, write_fd)
_terminal_fd = None  # during a capture on a terminal: where the progress bars' redraws go
_SENTINEL = b"\x00lucid_yolo: end of output\x00"
_drained = threading.Event()


def _flush_all():
    for stream in (sys.stdout, sys.__stdout__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    _libc.fflush(None)  # the native side's C stdio buffers


def _log_line(raw):
    LOGGER.info(raw.decode(errors="replace").rsplit("\r", 1)[-1].replace("\033[K", ""))


def _pump(read_fd):
    """Reads the pipe for the process's lifetime: complete lines to LOGGER.info (the text after the
    line's last carriage return, without the erase-line sequence); on a terminal, a line being
    redrawn (a progress bar) goes on to it as it is, and is cleared before its final text is logged;
    the sentinel line tells native_output that everything before it has been logged."""
    pending = b""
    drawn = False
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            terminal = _terminal_fd
            if drawn and terminal is not None:
                os.write(terminal, b"\r\033[K")
            drawn = False
            if line.endswith(_SENTINEL):
                if line[:-len(_SENTINEL)]:
                    _log_line(line[:-len(_SENTINEL)])
                _drained.set()
                continue
            try:
                _log_line(line)
            except Exception:  # a failing handler must not end the reader
                pass
        terminal = _terminal_fd
        if terminal is not None and b"\r" in pending:
            pending = pending[pending.rfind(b"\r"):]
            os.write(terminal, pending)
            drawn = True


def _reader_pipe():
    global _pipe
    if _pipe is None:
        _pipe = os.pipe()
        threading.Thread(target=_pump, args=(_pipe[0],), daemon=True, name="lucid_yolo-output").start()
    return _pipe


def _own_stdout_streams(replacement):
    """sys.stdout, and the streams of the logger's handlers, that write to fd 1: each (owner, name)
    pointed at `replacement`, as a list of (owner, name, previous) to restore."""
    swapped = []

    def writes_fd1(stream):
        try:
            return stream is not None and stream.fileno() == 1
        except (AttributeError, OSError, ValueError):
            return False

    if writes_fd1(sys.stdout):
        swapped.append((sys, "stdout", sys.stdout))
    for handler in LOGGER.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, StdoutHandler) and \
                writes_fd1(handler.stream):
            swapped.append((handler, "stream", handler.stream))
    for owner, name, _ in swapped:
        setattr(owner, name, replacement)
    return swapped


@contextlib.contextmanager
def native_output():
    """The native output of the commands run inside, line by line into LOGGER (module docstring).
    Nested uses capture once."""
    global _depth, _terminal_fd
    with _depth_lock:
        _depth += 1
        outer = _depth == 1
    if not outer or os.environ.get("LUCID_LOG_CAPTURE") == "0":
        try:
            yield
        finally:
            with _depth_lock:
                _depth -= 1
        return
    _flush_all()
    _, write_fd = _reader_pipe()
    saved = os.dup(1)
    terminal = os.isatty(saved)
    original = open(saved, "w", buffering=1, closefd=False, encoding=getattr(sys.stdout, "encoding", None) or "utf-8",
                    errors="replace")
    swapped = _own_stdout_streams(original)
    _terminal_fd = saved if terminal else None
    _lucid.set_progress_terminal(1 if terminal else -1)
    _drained.clear()
    os.dup2(write_fd, 1)
    try:
        yield
    finally:
        _flush_all()
        os.write(1, _SENTINEL + b"\n")
        _drained.wait(timeout=30)  # everything written before the sentinel has been logged
        os.dup2(saved, 1)
        _terminal_fd = None
        _lucid.set_progress_terminal(-1)
        for owner, name, previous in reversed(swapped):
            setattr(owner, name, previous)
        original.flush()
        original.close()
        os.close(saved)
        with _depth_lock:
            _depth -= 1
