#!/usr/bin/env bash
# The reference workload fit (../shared/bench/README.md): 512 training and 16 validation images from
# coco128-seg, yolo26n-seg from scratch, 5 epochs, batch 4, 640 px, BF16, MuSGD, prepared-image cache
# in RAM, 4 workers, mosaic throughout, 1 warmup epoch, validation every epoch. Native execution.
#   bench/fit_workload.sh LUCID_BINARY WORKLOAD_DIR OUT_DIR [runs=1] [extra lucid options...]
# Each run is a fresh process; prints complete-fit time (and the training loop's), whole-process time, peak memory, the final
# metrics and the SHA-256 of the last checkpoint and of the per-step loss bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lucid=${1:?lucid binary}; work=${2:?workload dir}; out=${3:?out dir}; runs=${4:-1}; shift 4 || shift $#
shared=${LUCID_SHARED:-$here/../../shared}  # the checkout sits beside ../shared
[ -f "$work/data.yaml" ] || bash "$shared/bench/make-workload.sh" "$work" > /dev/null
export CUBLAS_WORKSPACE_CONFIG=:4096:8
mkdir -p "$out"
runs_dir=${LUCID_RUNS:-/tmp/lucid-fit-runs}  # checkpoints stay out of OUT_DIR
for ((r = 1; r <= runs; r++)); do
  log="$out/fit-$r.log"
  start=$(date +%s.%N)
  "$lucid" train data="$work/data.yaml" model=yolo26n-seg.yaml epochs=5 batch=4 imgsz=640 optimizer=MuSGD \
    close_mosaic=0 warmup_epochs=1 workers=4 cache=ram device=0 project="$runs_dir" name="fit$r" exist_ok=True "$@" \
    > "$log" 2>&1
  end=$(date +%s.%N)
  run="$runs_dir/fit$r"
  # The complete fit from before data, model and trainer construction (the device's set-up for the
  # batch shapes included), as the peer's clock runs; the epochs alone: from the training loop's start.
  fit=$(grep -m1 -o 'complete fit: [0-9.]*' "$log" | grep -o '[0-9.]*$')
  epochs=$(grep -o 'completed in [0-9.]* hours ([0-9.]* s)' "$log" | grep -o '([0-9.]* s)' | tr -d '(s) ')
  echo "run $r: complete fit ${fit} s (training loop ${epochs} s), whole process $(awk "BEGIN{printf \"%.3f\", $end - $start}") s, $(grep 'peak GPU memory' "$log")"
  echo "  final: $(grep -A1 'Class     Images' "$log" | tail -1 | tr -s ' ')"
  echo "  sha256 last checkpoint $(sha256sum "$run/weights/last.safetensors" | cut -c1-16), step losses $(sha256sum "$run/step_losses.f32" | cut -c1-16)"
  grep -E "^ +[0-9]+/[0-9]+ .*100%" "$log" | tail -1 | sed 's/^/  last epoch: /'
  grep -h '^step time' "$log" | sed 's/^/  /'
done
