#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine: system packages, the project venv (.venv) with the
# pinned torch wheel that provides LibTorch, then configure and build into build/.
#
#   ./scripts/setup.sh          everything: the venv with every pinned package (the tests' oracles:
#                               ultralytics, pycocotools, onnx, tensorboard, ...) and every target
#                               and the lucid_yolo Python package, installed into build/pyvenv (its
#                               wheel written to build/dist)
#   ./scripts/setup.sh lucid    the main job only: the venv with the torch wheel alone, and the lucid
#                               target (a later full set-up adds the rest)
# Any other arguments are build targets (scripts/build.sh), built after the full venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

pkgs=(build-essential cmake ninja-build ccache pkg-config python3-venv clang-format
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
      libjpeg62-turbo-dev libpng-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev
      libcairo2-dev fonts-dejavu-core libavcodec-dev libavformat-dev libavutil-dev libswscale-dev
      libgloo-dev libonnx-dev libprotobuf-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

# The main job needs only LibTorch, from the pinned torch wheel. The test suite needs every pinned
# package and the export packages marked "ci" in requirements-export.txt (their tests run; the
# unmarked ones skip without theirs), installed with the project's pins as constraints.
# LUCID_EXPORT_EXTRAS=all adds every export package. The stamp says what the venv holds.
main_only=0
[ "$*" = lucid ] && main_only=1
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$py" -m venv .venv; fi
stamp=.venv/.requirements.sha
have=$(cat "$stamp" 2>/dev/null || true)
want=$(cat requirements.txt requirements-export.txt | sha256sum | cut -d' ' -f1)
[ "${LUCID_EXPORT_EXTRAS:-}" = all ] && want="$want all"
if [ "$have" != "$want" ] && { [ $main_only = 0 ] || [ "$have" != "torch $want" ]; }; then
  .venv/bin/python -m pip install -q --upgrade pip
  if [ $main_only = 1 ]; then
    .venv/bin/python -m pip install -q "$(grep -E '^torch==' requirements.txt)"
    echo "torch $want" > "$stamp"
  else
    .venv/bin/python -m pip install -q -r requirements.txt
    if [ "${LUCID_EXPORT_EXTRAS:-}" = all ]; then
      extras=$(grep -E '^[a-z]' requirements-export.txt | cut -d' ' -f1)
    else
      extras=$(grep -E '^[a-z].*# +ci ' requirements-export.txt | cut -d' ' -f1)
    fi
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install -q -c requirements.txt $extras
    echo "$want" > "$stamp"
  fi
fi

"$root/scripts/build.sh" "$@"
# The test suite's set-up also installs the lucid_yolo package as a user does, `pip install .` into a
# fresh venv (build/pyvenv) holding only the pinned torch, numpy, pillow and scikit-build-core, built in
# the same build folder (only the module's own sources are new), then the export packages (never the
# reference package), and its wheel as CI builds it; its tests are labelled python.
if [ $# -eq 0 ]; then "$root/scripts/python_package.sh" --wheel; fi
