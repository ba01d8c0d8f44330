#!/usr/bin/env bash
# ONNX export time, lucid against the reference, on this machine: for each model the same weights
# (seeded by `lucid model save`, handed to the reference as the .pt `lucid export format=pt` writes),
# each export a fresh process, RUNS times in alternation; prints the median (min-max) seconds.
#   bench/onnx_export_time.sh LUCID_BINARY PYTHON_WITH_ULTRALYTICS [runs=3] [models...]
# (default models: yolo26n-seg yolo26x-seg; imgsz 640, FP32, fixed shape: both tools' defaults.)
set -euo pipefail
lucid=${1:?lucid binary}; python=${2:?python with ultralytics}; runs=${3:-3}; shift 3 || shift $#
models=("$@"); [ ${#models[@]} -eq 0 ] && models=(yolo26n-seg yolo26x-seg)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
stats() { sort -n | awk '{v[NR]=$1} END {printf "%.2f s (%.2f-%.2f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
seconds() { local s=$(date +%s.%N); "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; awk "BEGIN{print $(date +%s.%N) - $s}"; }
for m in "${models[@]}"; do
  "$lucid" model save model="$m.yaml" out="$work/$m.safetensors" > /dev/null
  "$lucid" export model="$work/$m.safetensors" format=pt out="$work/$m.pt" > /dev/null
  : > "$work/lucid.txt"; : > "$work/ref.txt"
  for ((r = 1; r <= runs; r++)); do
    seconds env LUCID_PYTHON=/nonexistent "$lucid" export model="$work/$m.safetensors" format=onnx imgsz=640 \
      out="$work/lucid.onnx" >> "$work/lucid.txt"
    seconds "$python" -c "from ultralytics import YOLO; YOLO('$work/$m.pt').export(format='onnx', imgsz=640)" >> "$work/ref.txt"
  done
  echo "$m: lucid $(stats < "$work/lucid.txt"), reference $(stats < "$work/ref.txt") ($runs runs each, $(nproc) cores)"
done
