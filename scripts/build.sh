#!/usr/bin/env bash
# Configure and build into build/ (or $LUCID_BUILD_DIR) against the torch of $LUCID_PYTHON
# (default: the project venv made by scripts/setup.sh). Targets given as arguments, else in
# LUCID_BUILD_TARGETS (e.g. "lucid"), are built alone; without either, everything (the tests and
# the Python extension module too).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_BUILD_DIR:-$root/build}
python=${LUCID_PYTHON:-$root/.venv/bin/python}
jobs=${LUCID_JOBS:-$(nproc)}
targets=${*:-${LUCID_BUILD_TARGETS:-}}
module=()
# The module is built for the venv's Python (its headers and extension suffix).
[ -z "$targets" ] && module=(-DLUCID_PYTHON_MODULE=ON -DPython_EXECUTABLE="$python")
cmake -S "$root" -B "$build" -G Ninja -DLUCID_PYTHON="$python" "${module[@]}" ${LUCID_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs" ${targets:+--target $targets}
