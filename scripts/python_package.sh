#!/usr/bin/env bash
# `pip install .` of the lucid_yolo package (docs/python.md), against the torch already installed.
#
#   scripts/python_package.sh            into a fresh venv, build/pyvenv (LUCID_PACKAGE_VENV=DIR: DIR), that
#                                        first gets only the pinned torch, numpy, pillow and scikit-build-core, as a
#                                        user installs it; the test set-up (scripts/setup.sh) runs this after
#                                        its build
#   ... --wheel                          also writes the wheel to build/dist and prints its size
#
# Built in build/ (LUCID_WHEEL_BUILD_DIR: another folder), whose objects are already compiled, and
# linked to the torch of the project venv (the same release); prints the install's time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_WHEEL_BUILD_DIR:-${LUCID_BUILD_DIR:-$root/build}}
pin() { grep -E "^$1==" "$root/requirements.txt"; }
venv=${LUCID_PACKAGE_VENV:-$build/pyvenv}
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# pillow: the package's tests give it PIL images (tests/python/memory_sources.py), as users do.
"$venv/bin/python" -m pip install -q "$(pin torch)" "$(pin numpy)" "$(pin pillow)" "$(pin scikit-build-core)"
# No build isolation: the build links the torch installed in the venv (as torchvision's source builds).
config=(-C "build-dir=$build")
cd "$root"
start=$(date +%s)
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps "${config[@]}" .
echo "lucid_yolo: pip install . into $venv took $(( $(date +%s) - start )) s"
if [ "${1:-}" = --wheel ]; then
  dist="$build/dist"
  rm -rf "$dist"
  "$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" "${config[@]}" .
  wheel=$(ls "$dist"/lucid_yolo-*.whl)
  echo "lucid_yolo: wheel $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"
fi
(cd / && "$venv/bin/python" -c "import lucid_yolo; print('import ok:', lucid_yolo.__file__)")
