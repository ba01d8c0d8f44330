#!/usr/bin/env bash
# Hyperparameter evolution side by side with the reference package in one call on a GPU: YOLO(model).tune(...)
# of yolo26n-seg (from scratch) on the 512-image reference workload, the same arguments in each arm
# (data, epochs, iterations, batch 16, imgsz 640, device 0, plots=False, save=False, val=True, seed 0;
# optimizer AdamW, both tuners' default), each arm a fresh process in a folder of its own:
#   sequential   lucid_yolo's tune, concurrent=1 (the reference's order: each trial mutated from all before it)
#   concurrent   lucid_yolo's tune, concurrent=LUCID_TUNE_CONCURRENT trials at once
#   ultralytics  the reference's model.tune (8.4.190: each trial a `python -m ultralytics.cfg.__init__ train`
#                subprocess of the same interpreter, not the `yolo` console entry, so PEER_SITE on PYTHONPATH,
#                which the subprocess inherits, is all it needs)
#   bench/tune_peer.sh OUT_DIR
# Prints per arm: wall seconds, trials completed, best fitness (mAP50-95 boxes + masks) and its iteration,
# the first trial's fitness (the default hyperparameters in both tuners), every trial's fitness, and from
# nvidia-smi samples (when it exists) the device's peak memory in use, the most compute processes at once
# and the mean utilisation. Summary in OUT_DIR/summary.txt; the arms' logs, GPU samples and tune results
# (tune_results.ndjson, lucid's tune_results.csv, best_hyperparameters.yaml) in OUT_DIR/logs.tar.gz.
# Each package runs its own defaults otherwise (lucid: cache=ram, whole-step CUDA graph replay, BF16;
# the reference: cache=False, AMP). The reference's mutations draw from fresh entropy (its tuner has no
# seed), lucid's from seed=; so only iteration 1 trains the same hyperparameters in every arm.
# Environment: LUCID_SHARED (the shared folder), LUCID_PYTHON (a Python with torch), PEER_PYTHON (the
# reference's Python, default LUCID_PYTHON), PEER_SITE (the reference package's site folder, default
# /tmp/peer-site; empty: none added), LUCID_PACKAGE_DIR (a folder holding lucid_yolo with its built _lucid
# module, put first on PYTHONPATH; empty: LUCID_PYTHON's own lucid_yolo), LUCID_MODELS_DIR (default: the
# package's models/, else this tree's models/). Knobs: LUCID_TUNE_ITERATIONS (8), LUCID_TUNE_EPOCHS (2),
# LUCID_TUNE_CONCURRENT (4), LUCID_TUNE_ARMS ("sequential concurrent ultralytics", run in that order),
# LUCID_TUNE_DEADLINE (570: seconds from the start after which an arm still running is stopped, with
# its finished trials reported, so that the summary and logs always come back inside a 600 s call);
# for a dry run on a CPU: LUCID_TUNE_DEVICE (0), LUCID_TUNE_IMGSZ (640), LUCID_TUNE_BATCH (16),
# LUCID_TUNE_DATA (a data.yaml instead of the workload), LUCID_TUNE_MODEL (yolo26n-seg.yaml).
# Estimate on one H100 at the defaults (8 trials x 2 epochs): the reference ~40-45 s a trial (process and
# package start ~5 s, trainer/data/AMP set-up and first-epoch overheads ~25 s, ~6.5 s a steady epoch at
# 197 ms/step, shared/bench/README.md), ~330-360 s; lucid sequential ~8-10 s a trial, ~70-90 s; lucid
# concurrent=4 ~35-50 s; with the workload ~7.5-8 min in all. LUCID_TUNE_EPOCHS=1 takes ~1 min less.
# On the GPU machine:
#   LUCID_SHARED=../shared LUCID_PYTHON=/opt/torch/.venv/bin/python3 PEER_SITE=/tmp/peer-site \
#     LUCID_PACKAGE_DIR=<folder with lucid_yolo and _lucid> bench/tune_peer.sh "$OUT"
# Dry run here (CPU, tiny): LUCID_TUNE_DEVICE=cpu LUCID_TUNE_IMGSZ=64 LUCID_TUNE_BATCH=8 LUCID_TUNE_ITERATIONS=2
#   LUCID_TUNE_EPOCHS=1 LUCID_TUNE_CONCURRENT=2 LUCID_TUNE_DATA=<16-image data.yaml> PEER_SITE= \
#   LUCID_PYTHON=build/pyvenv/bin/python PEER_PYTHON=.venv/bin/python bench/tune_peer.sh /tmp/tune-dry
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?out dir}
start=$(date +%s)
deadline=$((start + ${LUCID_TUNE_DEADLINE:-570}))
shared=${LUCID_SHARED:-$here/../../shared}
py=${LUCID_PYTHON:-python3}
peer_py=${PEER_PYTHON:-$py}
peer=${PEER_SITE-/tmp/peer-site}
iterations=${LUCID_TUNE_ITERATIONS:-8}
epochs=${LUCID_TUNE_EPOCHS:-2}
concurrent=${LUCID_TUNE_CONCURRENT:-4}
arms=${LUCID_TUNE_ARMS:-sequential concurrent ultralytics}
device=${LUCID_TUNE_DEVICE:-0}
model=${LUCID_TUNE_MODEL:-yolo26n-seg.yaml}
work=/tmp/lucid-tune-peer
logs=$work/logs
rm -rf "$logs"
mkdir -p "$out" "$work" "$logs"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 YOLO_OFFLINE=1
if [ -z "${LUCID_MODELS_DIR:-}" ] && [ ! -d "${LUCID_PACKAGE_DIR:-/nonexistent}/lucid_yolo/models" ]; then
  export LUCID_MODELS_DIR=$here/../models
fi
pythonpath() { echo "$1${PYTHONPATH:+${1:+:}$PYTHONPATH}"; }  # pythonpath FIRST: FIRST before PYTHONPATH
ref_path=$(pythonpath "$peer")
mine_path=$(pythonpath "${LUCID_PACKAGE_DIR:-}")

data=${LUCID_TUNE_DATA:-$work/data/data.yaml}
[ -n "${LUCID_TUNE_DATA:-}" ] || [ -f "$data" ] || bash "$shared/bench/make-workload.sh" "$work/data" > /dev/null

arm() {  # arm NAME PYTHONPATH PYTHON IMPL [tune options...]: one tune in a fresh process, cut at the deadline
  local name=$1 path=$2 python=$3 impl=$4; shift 4
  local dir=$work/arms/$name left=$((deadline - $(date +%s)))
  rm -rf "$dir"; mkdir -p "$dir"
  if [ $left -lt 30 ]; then echo "$name: not run, ${left} s left before LUCID_TUNE_DEADLINE"; return; fi
  "$py" "$here/tune_peer.py" sample "$logs/$name.gpu" & local sampler=$!
  local s; s=$(date +%s.%N)
  timeout -k 10 $left env PYTHONPATH="$path" "$python" "$here/tune_peer.py" tune "$impl" --data "$data" \
    --project "$dir" --model "$model" --epochs "$epochs" --iterations "$iterations" \
    --batch "${LUCID_TUNE_BATCH:-16}" --imgsz "${LUCID_TUNE_IMGSZ:-640}" --device "$device" --seed 0 "$@" \
    > "$logs/$name.log" 2>&1
  local rc=$? e; e=$(date +%s.%N)
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  "$py" "$here/tune_peer.py" report "$name" "$dir" "$(awk "BEGIN{print $e - $s}")" $rc \
    --samples "$logs/$name.gpu" --log "$logs/$name.log"
  [ $rc = 124 ] && echo "             stopped at LUCID_TUNE_DEADLINE; the trials above are those it finished"
  [ $rc != 0 ] && [ $rc != 124 ] && tail -3 "$logs/$name.log" | sed 's/^/             /'
  mkdir -p "$logs/$name-tune"
  find "$dir" -maxdepth 2 \( -name 'tune_results.*' -o -name best_hyperparameters.yaml \) -exec cp {} "$logs/$name-tune/" \;
}
{
  echo "lucid: $(env PYTHONPATH="$mine_path" "$py" -c 'import lucid_yolo; print(lucid_yolo.__version__, "from", lucid_yolo.__file__)' 2>&1 | tail -1)"
  echo "reference: $(env PYTHONPATH="$ref_path" "$peer_py" -c 'import ultralytics; print(ultralytics.__version__, "from", ultralytics.__file__)' 2>&1 | tail -1)"
  gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)
  echo "device ${device}${gpu:+ ($gpu)}; $(nproc) CPUs; data $data"
  echo "tune: $model, $iterations trials x $epochs epochs, batch ${LUCID_TUNE_BATCH:-16}, imgsz ${LUCID_TUNE_IMGSZ:-640}, seed 0, plots=False save=False val=True"
  for a in $arms; do
    case $a in
      sequential) arm sequential "$mine_path" "$py" lucid --concurrent 1 ;;
      concurrent) arm "concurrent-$concurrent" "$mine_path" "$py" lucid --concurrent "$concurrent" ;;
      ultralytics) arm ultralytics "$ref_path" "$peer_py" ultralytics ;;
      *) echo "$a: not an arm (sequential, concurrent, ultralytics)" ;;
    esac
  done
  echo "all arms: $(($(date +%s) - start)) s"
} 2>&1 | tee "$out/summary.txt"
cp "$out/summary.txt" "$logs/" && tar -czf "$out/logs.tar.gz" -C "$work" logs
