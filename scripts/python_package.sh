#!/usr/bin/env bash
# Builds the lucid_yolo wheel and installs it into a fresh venv that gets only the pinned torch and
# numpy (build/pyvenv, or $LUCID_PACKAGE_VENV), as a user's `pip install .` does; prints the wheel's
# size and build time. LUCID_WHEEL_BUILD_DIR (e.g. build) reuses an existing build folder's objects.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_BUILD_DIR:-$root/build}
venv=${LUCID_PACKAGE_VENV:-$build/pyvenv}
pin() { grep -E "^$1==" "$root/requirements.txt"; }
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
# The wheel build needs scikit-build-core beside the torch it links (no build isolation, so that
# the installed torch is the one found).
"$venv/bin/python" -m pip install -q "$(pin torch)" "$(pin numpy)" "$(pin scikit-build-core)"
dist="$build/dist"
rm -rf "$dist"
config=()
if [ -n "${LUCID_WHEEL_BUILD_DIR:-}" ]; then config+=(-C "build-dir=$LUCID_WHEEL_BUILD_DIR"); fi
if [ -n "${LUCID_WHEEL_PYTHON:-}" ]; then config+=(-C "cmake.define.LUCID_PYTHON=$LUCID_WHEEL_PYTHON"); fi
start=$(date +%s)
(cd "$root" && "$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" "${config[@]}" .)
end=$(date +%s)
wheel=$(ls "$dist"/lucid_yolo-*.whl)
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
echo "lucid_yolo wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built in $((end - start)) s"
(cd / && "$venv/bin/python" -c "from lucid_yolo import YOLO; import lucid_yolo; print('import ok:', lucid_yolo.__file__)")
