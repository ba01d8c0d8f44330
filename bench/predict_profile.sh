#!/usr/bin/env bash
# Where prediction's time goes on a GPU: coco128-seg's 128 images (mixed letterbox shapes) predicted
# by weights trained here for a few epochs, one fresh process per line, per-image milliseconds from
# `lucid predict`'s own lines (an image's share of its batch), then the first-forward cost of each
# kind of convolution at new input shapes (bench/predict_first_forward.py).
#   bench/predict_profile.sh LUCID_BINARY OUT_DIR [model yaml, default yolo26m-seg.yaml]
# Environment: LUCID_SHARED (the shared folder), LUCID_PYTHON (a Python with torch).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lucid=${1:?lucid binary}; out=${2:?out dir}; model=${3:-yolo26m-seg.yaml}
shared=${LUCID_SHARED:-$here/../../shared}
images=$shared/data/coco128-seg/images/train2017
work=/tmp/lucid-predict-profile
mkdir -p "$out"
[ -f "$work/data/data.yaml" ] || bash "$shared/bench/make-workload.sh" "$work/data" > /dev/null
export CUBLAS_WORKSPACE_CONFIG=:4096:8
w=$work/runs/fit/weights/best.safetensors
if [ ! -f "$w" ]; then
  "$lucid" train data="$work/data/data.yaml" model="$model" epochs=3 batch=16 imgsz=640 workers=8 cache=ram \
    device=0 plots=False project="$work/runs" name=fit exist_ok=True > "$out/train.log" 2>&1 || { tail -20 "$out/train.log"; exit 1; }
fi
summary() {  # summary LOG: per-image ms (median, max), images over 3x the median, the first five
  awk '/^image [0-9]+\/[0-9]+ /{ms=$NF; sub(/ms$/,"",ms); print ms}' "$1" | sort -n | awk '
    {v[NR]=$1} END {m=v[int((NR+1)/2)]; c=0; for(i=1;i<=NR;i++) if (v[i]>3*m) c++;
      printf "images %d, median %.1f ms, max %.1f ms, over 3x median: %d", NR, m, v[NR], c}'
  echo "; first: $(awk '/^image [0-9]+\/[0-9]+ /{ms=$NF; printf "%s ", ms; if (++n==5) exit}' "$1")"
}
run() {  # run NAME "ENV=VALUE ..." lucid-predict-options...: one fresh process, timed
  local name=$1 vars=$2; shift 2
  local s=$(date +%s.%N)
  env $vars "$lucid" predict model="$w" source="$images" save=False device=0 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local e=$(date +%s.%N)
  printf "%-28s rc=%d process %s s; %s\n" "$name" $rc "$(awk "BEGIN{printf \"%.2f\", $e - $s}")" "$(summary "$out/$name.log")"
}
{
  echo "weights: $w ($model, 3 epochs on the 512-image workload)"
  for r in 1 2; do
    run "b1-run$r" "" batch=1
    run "b16-run$r" "" batch=16
  done
  if [ -z "${LUCID_PROFILE_QUICK:-}" ]; then  # LUCID_PROFILE_QUICK=1: batch 1 and 16 only
    run "b1-cudnn-depthwise" "LUCID_DEPTHWISE_KERNELS=0" batch=1
    run "b1-fp32" "" batch=1 half=False
  fi
} | tee "$out/summary.txt"
if [ -z "${LUCID_PROFILE_QUICK:-}" ]; then
  "${LUCID_PYTHON:-python3}" "$here/predict_first_forward.py" > "$out/first_forward.txt" 2>&1
  cat "$out/first_forward.txt"
fi
