#!/usr/bin/env bash
# `pip install .` of the lucid_yolo package (docs/python.md), against the torch already installed.
#
#   scripts/python_package.sh            into a fresh venv, build/pyvenv (LUCID_PACKAGE_VENV=DIR: DIR), that
#                                        first gets only the pinned torch, numpy, pillow and scikit-build-core, as a
#                                        user installs it; once the package imports there, the venv gets
#                                        the export packages (below), never the reference package: the
#                                        venv where `lucid export` is tested without it
#                                        (tests/python/test_export_without_reference.py). The test set-up
#                                        (scripts/setup.sh) runs this after its build
#   ... --wheel                          also writes the wheel to build/dist and prints its size
#   ... --no-export-packages             the package alone
#   ... --export-packages                only the export packages, into the existing venv (one made
#                                        before this step existed)
#
# Built in build/ (LUCID_WHEEL_BUILD_DIR: another folder), whose objects are already compiled, and
# linked to the torch of the project venv (the same release); prints the install's time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LUCID_WHEEL_BUILD_DIR:-${LUCID_BUILD_DIR:-$root/build}}
pin() { grep -E "^$1==" "$root/requirements.txt" "$root/requirements-export.txt" -h | cut -d' ' -f1; }
venv=${LUCID_PACKAGE_VENV:-$build/pyvenv}
want_wheel=0 package=1 extras=1
for arg in "$@"; do
  case $arg in
    --wheel) want_wheel=1 ;;
    --no-export-packages) extras=0 ;;
    --export-packages) package=0 ;;
    *) echo "python_package.sh: unknown argument $arg (--wheel, --no-export-packages, --export-packages)" >&2; exit 2 ;;
  esac
done
# The packages `lucid export` and the formats' runtimes need from the package's Python (its exporter
# when LUCID_PYTHON is unset): safetensors (the weights the exporter reads), onnx and openvino (the
# OpenVINO IR from lucid's ONNX), onnxruntime (runs the ONNX file), torchvision (the NMS that
# torchscript nms=True traces), coremltools (Core ML). Pinned as the project pins them, with
# requirements.txt as constraints so that none moves torch or numpy: about 350 MB, 12 s from pip's
# cache on the 2-core machine. Not the reference package, nor the large optional ones (nncf,
# executorch, litert-torch: the test runs those formats where a venv has them).
export_packages() {
  local pins=() p start
  # polars: to_df() of Results and the metrics (the reference's DataFrame library, pinned in
  # requirements.txt), which oracle.test_results_objects_oracle compares with the reference's.
  for p in safetensors onnx onnxruntime openvino torchvision coremltools polars; do pins+=("$(pin "$p")"); done
  cd "$root"
  start=$(date +%s)
  "$venv/bin/python" -m pip install -q -c requirements.txt "${pins[@]}"
  echo "lucid_yolo: export packages into $venv took $(( $(date +%s) - start )) s"
}
if [ $package = 0 ]; then
  [ -x "$venv/bin/python" ] || { echo "python_package.sh: $venv has no Python: run scripts/python_package.sh first" >&2; exit 1; }
  export_packages
  exit 0
fi
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
if [ $want_wheel = 1 ]; then
  dist="$build/dist"
  rm -rf "$dist"
  "$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$dist" "${config[@]}" .
  wheel=$(ls "$dist"/lucid_yolo-*.whl)
  echo "lucid_yolo: wheel $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"
fi
# The package's own import, in the venv that holds only what the package itself installs with.
(cd / && "$venv/bin/python" -c "import lucid_yolo; print('import ok:', lucid_yolo.__file__)")
if [ $extras = 1 ]; then export_packages; fi
