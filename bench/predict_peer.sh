#!/usr/bin/env bash
# Prediction and validation side by side with the reference package in one call on a GPU: the same
# weights (LUCID_PEER_MODEL, default yolo26n-seg.yaml, trained here LUCID_PEER_EPOCHS, default 20, on
# the 512-image workload, so that it detects; written as the reference's .pt by `lucid export
# format=pt`), coco128-seg's 128 images (20 letterbox shapes at batch 1), a 1,000-frame 1280x720
# video made from them, and val on the 128 images with their labels.
#   bench/predict_peer.sh LUCID_BINARY OUT_DIR
# Fresh processes (LUCID_PEER_ROUNDS rounds, default 2, numbered from LUCID_PEER_ROUND_FIRST, default 1,
# so that calls can continue the alternation; the two packages alternating): folder predict
# at batch 1 and 16, the video at batch 1 (`lucid predict` where lucid was built with FFmpeg), val;
# `lucid predict`/`lucid val` against a Python process of the reference's
# YOLO(...).predict(stream=True)/.val(). The video frame by frame from memory (model(frame) in a
# cv2 capture loop) through each Python API. Then warm in one process (lucid_yolo from
# LUCID_PACKAGE_DIR): two passes over the folder at batch 1 and at 16. Logs in OUT_DIR/logs.tar.gz.
# Each package runs its defaults (lucid: BF16 autocast; the reference: FP32, half=False).
# Environment: LUCID_SHARED (the shared folder), LUCID_PYTHON (a Python with torch and cv2),
# PEER_SITE (the reference package's site folder, default /tmp/peer-site), LUCID_PACKAGE_DIR (a folder
# holding lucid_yolo with its built _lucid module; the warm lucid arm is skipped without it),
# LUCID_PEER_WARM=0 (no warm arms), LUCID_PEER_VIDEO_FILE=0 (no predict of the video file by the
# reference, where lucid's has no FFmpeg: the frames arms compare the two).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lucid=$(realpath "${1:?lucid binary}"); out=${2:?out dir}
shared=${LUCID_SHARED:-$here/../../shared}
py=${LUCID_PYTHON:-python3}
peer=${PEER_SITE:-/tmp/peer-site}
work=/tmp/lucid-predict-peer
logs=$work/logs
mkdir -p "$out" "$work" "$logs"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 YOLO_OFFLINE=1
ref() { PYTHONPATH=$peer${PYTHONPATH:+:$PYTHONPATH} "$@"; }
mine() { PYTHONPATH=${LUCID_PACKAGE_DIR:-}${PYTHONPATH:+:$PYTHONPATH} "$@"; }

# The data: the workload for the weights, coco128-seg for prediction and val, the video.
[ -f "$work/data/data.yaml" ] || bash "$shared/bench/make-workload.sh" "$work/data" > /dev/null
if [ ! -f "$work/coco128/data.yaml" ]; then
  cp -r "$shared/data/coco128-seg" "$work/coco128"
  { echo "path: $work/coco128"; echo "train: images/train2017"; echo "val: images/train2017"
    sed -n '/^names:/,$p' "$work/data/data.yaml"; } > "$work/coco128/data.yaml"
fi
images=$work/coco128/images/train2017
[ -f "$work/video.mp4" ] || "$py" "$here/predict_peer.py" video "$work/video.mp4" --images "$images" > /dev/null
# LUCID_PEER_TRAIN=coco128 trains on the 128 predicted images themselves, so that the weights detect
# on them (a timing workload with masks to draw, not an accuracy figure); default: the workload.
train_data=$work/data/data.yaml
[ "${LUCID_PEER_TRAIN:-workload}" = coco128 ] && train_data=$work/coco128/data.yaml
w=$work/runs/fit/weights/best.safetensors
if [ ! -f "$w" ]; then
  "$lucid" train data="$train_data" model="${LUCID_PEER_MODEL:-yolo26n-seg.yaml}" \
    epochs="${LUCID_PEER_EPOCHS:-20}" batch=16 imgsz=640 workers=8 \
    cache=ram device=0 plots=False project="$work/runs" name=fit exist_ok=True > "$out/train.log" 2>&1 ||
    { tail -20 "$out/train.log"; exit 1; }
fi
pt=$work/best.pt
[ -f "$pt" ] || ref env LUCID_PYTHON="$py" "$lucid" export model="$w" format=pt out="$pt" > "$out/export.log" 2>&1 ||
  { tail -20 "$out/export.log"; exit 1; }

summary() {  # per-image milliseconds of a lucid predict log: median, max, count over 3x the median
  # Whole lines only: a stderr line (LUCID_PREDICT_TRACE) can split a buffered stdout line.
  awk '/^(image|video) [0-9]+\/[0-9]+ .*[0-9.]+ms$/{ms=$NF; sub(/ms$/,"",ms); print ms}' "$1" | sort -n | awk '
    {v[NR]=$1} END {if (!NR) exit; m=v[int((NR+1)/2)]; c=0; for(i=1;i<=NR;i++) if (v[i]>3*m) c++;
      printf "images %d, median %.1f ms, max %.1f ms, over 3x median %d", NR, m, v[NR], c}'
}
fresh() {  # fresh NAME command...: one fresh process, its wall time and what it says of itself
  local name=$1; shift
  local s; s=$(date +%s.%N)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$? e; e=$(date +%s.%N)
  local said; said=$(grep -h '^{' "$logs/$name.log" | tail -1)
  [ -z "$said" ] && said="$(summary "$logs/$name.log") $(grep -h -o 'on cuda.*' "$logs/$name.log" | tail -1)"
  [[ $name == *val* ]] && said="$said $(grep -h -E '^ +all ' "$logs/$name.log" | tail -1)"
  [ $rc != 0 ] && said="$said $(tail -2 "$logs/$name.log" | tr '\n' ' ')"
  printf "%-22s rc=%d process %6.2f s  %s\n" "$name" $rc "$(awk "BEGIN{print $e - $s}")" "$said"
}
lucid_arms() {
  fresh "lucid-b1-r$1" "$lucid" predict model="$w" source="$images" batch=1 save=False device=0
  fresh "lucid-b16-r$1" "$lucid" predict model="$w" source="$images" batch=16 save=False device=0
  "$lucid" checks 2>/dev/null | grep -q -E "^FFmpeg +yes" &&
    fresh "lucid-video-r$1" "$lucid" predict model="$w" source="$work/video.mp4" batch=1 save=False device=0
  [ -n "${LUCID_PACKAGE_DIR:-}" ] &&
    fresh "lucid-frames-r$1" mine "$py" "$here/predict_peer.py" frames lucid "$w" "$work/video.mp4"
  fresh "lucid-val-r$1" "$lucid" val model="$w" data="$work/coco128/data.yaml" device=0 plots=False
}
ref_arms() {
  fresh "ref-b1-r$1" ref "$py" "$here/predict_peer.py" predict ultralytics "$pt" "$images" --batch 1
  fresh "ref-b16-r$1" ref "$py" "$here/predict_peer.py" predict ultralytics "$pt" "$images" --batch 16
  [ "${LUCID_PEER_VIDEO_FILE:-1}" = 1 ] &&
    fresh "ref-video-r$1" ref "$py" "$here/predict_peer.py" predict ultralytics "$pt" "$work/video.mp4" --batch 1
  fresh "ref-frames-r$1" ref "$py" "$here/predict_peer.py" frames ultralytics "$pt" "$work/video.mp4"
  fresh "ref-val-r$1" ref "$py" "$here/predict_peer.py" val ultralytics "$pt" "$work/coco128/data.yaml"
}
{
  echo "weights: $w ($(du -h "$w" | cut -f1)); reference: $(ref "$py" -c 'import ultralytics; print(ultralytics.__version__)')"
  first=${LUCID_PEER_ROUND_FIRST:-1}
  for r in $(seq "$first" $((first + ${LUCID_PEER_ROUNDS:-2} - 1))); do
    if [ $((r % 2)) = 1 ]; then ref_arms "$r"; lucid_arms "$r"; else lucid_arms "$r"; ref_arms "$r"; fi
  done
  [ "${LUCID_PEER_WARM:-1}" = 1 ] && echo "warm, in one process (two passes each):"
  [ "${LUCID_PEER_WARM:-1}" = 1 ] && for b in 1 16; do
    ref "$py" "$here/predict_peer.py" predict ultralytics "$pt" "$images" --batch $b --passes 2 2>"$logs/ref-warm-b$b.err"
    [ -n "${LUCID_PACKAGE_DIR:-}" ] && { mine "$py" "$here/predict_peer.py" predict lucid "$w" "$images" --batch $b \
      --passes 2 2>"$logs/lucid-warm-b$b.err" || tail -3 "$logs/lucid-warm-b$b.err"; }
  done
} | tee "$out/summary.txt"
cp "$out/summary.txt" "$logs/" && tar -czf "$out/logs.tar.gz" -C "$work" logs
