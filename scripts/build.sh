#!/usr/bin/env bash
# Configure and build into build/ (or $LUCID_BUILD_DIR) against the torch of $LUCID_PYTHON
# (default: the project venv made by scripts/setup.sh). LUCID_BUILD_TARGETS (e.g. "lucid") builds only
# those targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_BUILD_DIR:-$root/build}
python=${LUCID_PYTHON:-$root/.venv/bin/python}
jobs=${LUCID_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DLUCID_PYTHON="$python" ${LUCID_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs" ${LUCID_BUILD_TARGETS:+--target $LUCID_BUILD_TARGETS}
