#!/usr/bin/env bash
# `pip install .` of the lucid_yolo package into a fresh venv that first gets only the pinned torch,
# numpy and scikit-build-core (build/pyvenv, or $LUCID_PACKAGE_VENV), as a user installs it; prints
# the build time and the wheel's size. LUCID_WHEEL_BUILD_DIR (e.g. "$PWD/build") builds in an
# existing build folder, reusing its objects; LUCID_WHEEL_PYTHON links the torch of another Python
# (same version) for the same reason.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_BUILD_DIR:-$root/build}
venv=${LUCID_PACKAGE_VENV:-$build/pyvenv}
pin() { grep -E "^$1==" "$root/requirements.txt"; }
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# No build isolation: the build links the torch installed here (as torchvision's source builds).
"$venv/bin/python" -m pip install -q "$(pin torch)" "$(pin numpy)" "$(pin scikit-build-core)"
config=()
if [ -n "${LUCID_WHEEL_BUILD_DIR:-}" ]; then config+=(-C "build-dir=$LUCID_WHEEL_BUILD_DIR"); fi
if [ -n "${LUCID_WHEEL_PYTHON:-}" ]; then config+=(-C "cmake.define.LUCID_PYTHON=$LUCID_WHEEL_PYTHON"); fi
cd "$root"
start=$(date +%s)
"$venv/bin/python" -m pip install -q --no-build-isolation "${config[@]}" .
end=$(date +%s)
# The wheel that install built, again from the same (now up-to-date) build folder, for its size.
dist="$build/dist"
rm -rf "$dist"
"$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" "${config[@]}" .
wheel=$(ls "$dist"/lucid_yolo-*.whl)
echo "lucid_yolo: pip install . took $((end - start)) s; wheel $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"
(cd / && "$venv/bin/python" -c "from lucid_yolo import YOLO; import lucid_yolo; print('import ok:', lucid_yolo.__file__)")
