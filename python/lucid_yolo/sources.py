"""What ``predict(source)`` is given, as the native predictor takes it: files as ``lucid predict``'s
``source=`` (a path, folder, glob, URL or a list file of them), and images in memory, as the
reference takes them, as (name, RGB pixels) pairs handed over without a temporary file:

- a numpy array (H, W, 3) uint8 in BGR order, as ``cv2.imread`` and ``VideoCapture.read`` give;
- a PIL image (converted to RGB, its ``filename`` kept where it was opened from a file);
- a torch tensor (B, 3, H, W) or (3, H, W), RGB in 0-1, H and W multiples of 32: predicted at its
  own size (no letterbox), as the reference feeds it to the network;
- a list of these, in which paths are image files read as in a folder.

Results are named as the reference names them: ``image0.jpg``, ``image1.jpg``, ... by position."""
import os
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import torch

STRIDE = 32


def command_source(source):
    """The source as `lucid predict` takes it. A URL is the file of its name in the working directory
    when there is one (as the reference's check_file), else downloaded there; a list of paths goes
    over as a list file."""
    if source is None:
        raise ValueError("predict(): source= is required (an image, video, folder, glob, array, PIL image, "
                         "tensor or a list of them)")
    if isinstance(source, (list, tuple)):
        paths = [command_source(s) for s in source]
        listing = Path(os.environ.get("TMPDIR", "/tmp")) / f"lucid_sources_{os.getpid()}_{id(source)}.txt"
        listing.write_text("".join(f"{os.path.abspath(p)}\n" for p in paths))
        return str(listing)
    source = str(source)
    if source.startswith(("http://", "https://")):
        name = Path(urllib.parse.unquote(urllib.parse.urlparse(source).path)).name
        if not Path(name).exists():
            urllib.request.urlretrieve(source, name)
        return name
    return source


def _is_path(x):
    return isinstance(x, (str, os.PathLike))


def _is_pil(x):
    return type(x).__module__.startswith("PIL.") and hasattr(x, "convert")


def _tensor_images(t, first):
    """(name, RGB uint8 array) of each image of a BCHW or CHW tensor in 0-1 (the reference divides
    one with values above 1 by 255), and its size."""
    shape = tuple(t.shape)
    message = (f"a torch.Tensor source should be BCHW, e.g. shape (1, 3, 640, 640), with H and W divisible by "
               f"stride {STRIDE}; its shape {shape} is not")
    if t.ndim == 3:
        t = t.unsqueeze(0)
    if t.ndim != 4 or t.shape[1] != 3 or t.shape[2] % STRIDE or t.shape[3] % STRIDE or 0 in t.shape:
        raise ValueError(message)
    t = t.detach().to("cpu", torch.float32)
    if t.max() > 1.0 + torch.finfo(torch.float32).eps:
        t = t / 255.0
    pixels = (t.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
    names = [f"image{first + i}.jpg" for i in range(len(pixels))]
    return list(zip(names, pixels)), (t.shape[2], t.shape[3])


def _array_image(a, name):
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3 or 0 in a.shape:
        raise ValueError(f"a numpy array source should be an (H, W, 3) uint8 BGR image (as cv2.imread gives); "
                         f"{name} is {a.dtype} {a.shape}")
    return np.ascontiguousarray(a[..., ::-1])


def memory_source(source):
    """None where the source is files only; else ([(name, RGB (H, W, 3) uint8 array or None for a file)],
    the (H, W) of the tensors given, or None)."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items or all(_is_path(x) for x in items):
        return None
    entries, tensor_size = [], None
    for x in items:
        name = f"image{len(entries)}.jpg"
        if isinstance(x, torch.Tensor):
            images, size = _tensor_images(x, len(entries))
            if tensor_size not in (None, size):
                raise ValueError(f"tensor sources of one call should share one size: {tensor_size} and {size}")
            tensor_size = size
            entries += images
        elif isinstance(x, np.ndarray):
            entries.append((name, _array_image(x, name)))
        elif _is_pil(x):
            entries.append((getattr(x, "filename", "") or name, np.asarray(x.convert("RGB"))))
        elif _is_path(x):
            entries.append((command_source(x), None))
        else:
            raise TypeError(f"predict(): a source of type {type(x).__name__} is not taken; give a path, a numpy "
                            "array, a PIL image, a torch tensor or a list of them")
    if tensor_size is not None and not all(isinstance(x, torch.Tensor) for x in items):
        raise ValueError("tensor sources are predicted at their own size and cannot be mixed with other kinds of "
                         "source in one call")
    return entries, tensor_size
