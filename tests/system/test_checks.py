"""`lucid checks` against what it reports on: the versions of the torch this build links (the
venv's torch package: version, CUDA, cuDNN), the build's optional parts as the configure step found
them (build/CMakeCache.txt, and the fused kernels' objects in build.ninja), the devices torch sees,
and the settings file that LUCID_CONFIG_DIR names."""
import os
import re
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from lucid_runs import BUILD_DIR, check, failures, lucid  # noqa: E402


def rows(text):
    out = {}
    for line in text.splitlines():
        key, value = line[:23].strip(), line[23:].strip()
        out[key] = value
    return out


def cache_value(key):
    m = re.search(rf"^{re.escape(key)}:[A-Z]+=(.*)$", (BUILD_DIR / "CMakeCache.txt").read_text(), re.M)
    return m.group(1) if m else ""


def main():
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LUCID_CONFIG_DIR=tmp)
        r = lucid(["checks"], env)
        got = rows(r.stdout)
        print(r.stdout)
        check(got.get("lucid", "") != "", "the lucid version")
        check(got.get("LibTorch") == torch.__version__.split("+")[0],
              f"LibTorch {got.get('LibTorch')} is the venv's torch {torch.__version__}")
        if torch.version.cuda:
            check(got.get("CUDA") == torch.version.cuda, f"CUDA {got.get('CUDA')} is torch's {torch.version.cuda}")
            cudnn = torch.backends.cudnn.version()
            check(cudnn is None or f"({cudnn})" in got.get("cuDNN", ""), f"cuDNN {got.get('cuDNN')} is torch's {cudnn}")
        else:
            check(got.get("CUDA", "").startswith("not built"), "CUDA: a torch without CUDA says so")
        check(re.match(r"(GCC|clang) \d", got.get("compiler", "")) is not None, f"the compiler ({got.get('compiler')})")
        usable = torch.cuda.is_available()
        check(got.get("devices", "").startswith("cpu"), "the devices start with the CPU")
        if usable:
            n = torch.cuda.device_count()
            check(f"{n} CUDA device" in got["devices"], f"{n} CUDA devices listed")
            check(all(f"cuda:{i}" in got for i in range(n)), "a row per CUDA device")

        def built(name, yes):
            check(got.get(name, "").startswith("yes" if yes else "no ("), f"{name}: {got.get(name)} (configured: {yes})")

        built("FFmpeg", cache_value("FFMPEG_FOUND") == "1")
        built("cairo", cache_value("CAIRO_FOUND") == "1")
        built("Gloo", cache_value("LUCID_GLOO_INCLUDE_DIR") not in ("", "LUCID_GLOO_INCLUDE_DIR-NOTFOUND"))
        built("NCCL", cache_value("LUCID_NCCL_INCLUDE_DIR") not in ("", "LUCID_NCCL_INCLUDE_DIR-NOTFOUND"))
        built("fused CUDA kernels", "mask_loss_cuda.cu.o" in (BUILD_DIR / "build.ninja").read_text())
        check(got.get("settings", "").startswith(str(Path(tmp) / "settings.json")), "the settings file of LUCID_CONFIG_DIR")
        check(not any(Path(tmp).iterdir()), "checks writes nothing")
        r = lucid(["checks", "x=1"], env, expect=1)
        check("'x' is not a valid option" in r.stderr, f"an argument is refused by name ({r.stderr.strip()})")
    if failures:
        sys.exit(f"{len(failures)} failed")


if __name__ == "__main__":
    main()
