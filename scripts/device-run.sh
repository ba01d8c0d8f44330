#!/usr/bin/env bash
# One call on the GPU machine: configure and build against its torch (/opt/torch/.venv), run the
# tests labelled gpu and the named benchmarks, and write logs into OUT_DIR.
#   scripts/device-run.sh OUT_DIR [bench ...]
# bench names: model_step, floor (the deterministic whole-graph step at batch 4, 16 and 64, with
# cuDNN's depthwise convolutions and with lucid's kernels, LUCID_FLOOR_DW "0 1" or one of them: the
# floor the fits' steps are held to; LUCID_FLOOR_KERNEL_STEPS=N adds N profiled steps each, the floor's
# kernels beside the kernels bench's),
# loader (the 512-image reference workload, built under $LUCID_WORKLOAD, default
# /tmp/lucid-workload, from ../shared/bench; 1-16 workers, median of 5 runs), loader_gpu
# (the same with the images rendered on the GPU, gpu_augment's path: 1-16 workers), fit (the
# reference workload fit, native), fit_replay (the same with every stage recording on), fit_step
# (the same with capture_step=True, the whole step recorded), pairs,
# pairs16, stages (the workload fit native and replayed with stage_times=True), trace (Nsight
# Systems NVTX summary of a short replay fit, where nsys exists); default:
# model_step loader. LUCID_GPU_TESTS=0 skips the GPU tests; LUCID_GPU_TEST_FILTER
# runs only the GPU tests whose names match it; LUCID_BUILD_TARGETS (e.g. "lucid", with
# LUCID_GPU_TESTS=0) builds only those targets.
# screens: complete fits side by side, one fresh process each: for every screen in LUCID_SCREENS
#   (default "b4e5 b16e3 b64e3": batch 4 x 5 epochs, batch 16 x 3, batch 64 x 3 with 16 workers) the
#   arms in LUCID_ARMS (default "ultralytics native stages step"; also "default", lucid with no capture
#   option, i.e. capture_step on by default: the Ultralytics package from the
#   wheels in .whl/ when present (ultralytics, ultralytics_thop, ultralytics_platform, and polars (from
#   1.34 on with polars_runtime_32), which its trainer imports), lucid native (capture_step=False), lucid with the three
#   stage recordings, lucid with capture_step=True; dwkernels and dwnative: default and native with
#   lucid's depthwise kernels, LUCID_DEPTHWISE_KERNELS=1; cudnn and cudnnnative: with cuDNN's, =0; the
#   other lucid arms take the caller's LUCID_DEPTHWISE_KERNELS, unset: the build's default; an arm
#   with a number after its name, e.g. default2, is that arm run again); logs and a summary in
#   OUT_DIR/screens.
# scale: the scale workload (bench/scale_workload.sh: LUCID_SCALE_IMAGES training files, default 20000,
#   under /tmp/lucid-scale) trained for LUCID_SCALE_EPOCHS (default 1) at batch 64, 640 px, 16 workers, one
#   fresh process per arm in LUCID_SCALE_ARMS (default "ram disk none gpu ultralytics": lucid with
#   cache=ram, cache=disk (its cache file built first, in its own timed run), cache=False, gpu_augment=True
#   with cache=ram, and the Ultralytics wheels in .whl/ with cache=ram), each under bench/peak_memory.py
#   (peak host PSS of the process tree); images/s over each epoch, the loader wait, GPU memory and the
#   cache's build time and size; logs and a summary in OUT_DIR/scale.
# kernels: for every screen in LUCID_SCREENS a 2-epoch fit natively and with capture_step=True
#   (LUCID_KERNEL_ARMS) with kernel_times=LUCID_KERNEL_STEPS (default 16): the device time of every
#   kernel charged to its stage, and the costliest kernels; OUT_DIR/bench-kernels.log, and every kernel
#   in OUT_DIR/kernels/SCREEN-ARM.json (the fit report).
# predict: prediction latency and throughput of the weights LUCID_PREDICT_MODEL (a path in the
#   checkout, e.g. carried), eager and as compiled packages (format=aoti, compiled here at batch 1
#   and 16), on LUCID_PREDICT_IMAGE (default: a coco128-seg image from shared/); OUT_DIR/predict.
# ddp: data-parallel scaling on the GPUs of this machine: for every world in LUCID_DDP_WORLDS
#   (default 1 2 4, those with enough GPUs) the reference workload (4 images per GPU, 5 epochs) and
#   the batch-64 screen (64 per GPU, 3 epochs, 16 workers per rank) natively and with capture_step=True,
#   device=0,...,W-1; then Ultralytics DDP (--device 0,1, same global batches). Prints images/s per GPU
#   and the scaling efficiency against one GPU; logs in OUT_DIR/ddp. LUCID_DDP_SCREENS (ref b64)
#   and LUCID_DDP_ARMS (native step ultralytics) pick a part, to spread the bench over calls.
# pairs: `lucid bench pairs` on the reference workload (batch 4, 5 epochs), records and summary in
# OUT_DIR/pairs; pairs16: the batch-16, 3-epoch screen in OUT_DIR/pairs16. Environment:
#   LUCID_PAIRS (pairs per call, default 5), LUCID_PAIRS_FIRST (number of the first pair, so that
#   calls continue the alternating order; join their folders with `lucid bench merge`),
#   LUCID_REPLAY (the replay arm's capture options, default the three stage options; step, i.e.
#   capture_step, for the whole-step recording), LUCID_PAIRS_ARGS (more
#   `lucid train` options for both arms).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device-run.sh OUT_DIR [bench ...]}
shift
mkdir -p "$out"
benches=("$@")
[ ${#benches[@]} -eq 0 ] && benches=(model_step loader)
export LUCID_PYTHON=${LUCID_PYTHON:-/opt/torch/.venv/bin/python3}
export LUCID_BUILD_DIR=${LUCID_BUILD_DIR:-$root/build-device}
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  "$LUCID_PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} > "$out/machine.txt" 2>&1
start=$(date +%s)
if ! "$root/scripts/build.sh" > "$out/build.log" 2>&1; then
  echo "build failed; see build.log"; tail -40 "$out/build.log"; exit 1
fi
echo "build: $(( $(date +%s) - start )) s"
if [ "${LUCID_GPU_TESTS:-1}" != 0 ]; then
  export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}
  ctest --test-dir "$LUCID_BUILD_DIR" -L gpu -R "${LUCID_GPU_TEST_FILTER:-.}" --output-on-failure \
    > "$out/gpu-tests.log" 2>&1 || status=1
  tail -5 "$out/gpu-tests.log"
fi
pairs() {  # pairs NAME lucid-train-options...: the pair benchmark on the reference workload
  local name=$1 work=${LUCID_WORKLOAD:-/tmp/lucid-workload}
  shift
  [ -f "$work/data.yaml" ] || bash "${LUCID_SHARED:-$root/shared}/bench/make-workload.sh" "$work" > /dev/null
  # Run directories (checkpoints) and per-fit logs stay on this machine; the records and the summary
  # come back in OUT_DIR/NAME (OUT_DIR returns only a few files).
  local rc=0 keep=/tmp/lucid-pairs-out/$name
  "$LUCID_BUILD_DIR/lucid" bench pairs out="$keep" runs="/tmp/lucid-pairs-runs/$name" pairs="${LUCID_PAIRS:-5}" \
    ${LUCID_PAIRS_FIRST:+first_pair=$LUCID_PAIRS_FIRST} ${LUCID_REPLAY:+replay=$LUCID_REPLAY} \
    data="$work/data.yaml" model=yolo26n-seg.yaml imgsz=640 optimizer=MuSGD amp=True close_mosaic=0 warmup_epochs=1 \
    workers=4 cache=ram device=0 "$@" ${LUCID_PAIRS_ARGS:-} || rc=1
  mkdir -p "$out/$name"
  cp "$keep/pairs.jsonl" "$keep/summary.md" "$out/$name/" 2>/dev/null
  grep -h "^replay:" "$keep"/*.log 2>/dev/null | sort | uniq -c | head -20
  return $rc
}
workload() {  # the reference workload's folder, built from ../shared/bench on first use
  local work=${LUCID_WORKLOAD:-/tmp/lucid-workload}
  [ -f "$work/data.yaml" ] || bash "${LUCID_SHARED:-$root/shared}/bench/make-workload.sh" "$work" > /dev/null
  echo "$work"
}
peer_site() {  # the Ultralytics package from the wheels in .whl/, once, into /tmp/peer-site
  if ls "$root"/.whl/ultralytics-*.whl > /dev/null 2>&1 && [ ! -d /tmp/peer-site ]; then
    "$LUCID_PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/peer-site \
      "$root"/.whl/*.whl || status=1
  fi
}
scale_bench() {  # the scale workload, one fresh process per arm (see the header)
  local work=/tmp/lucid-scale n=${LUCID_SCALE_IMAGES:-20000} epochs=${LUCID_SCALE_EPOCHS:-1} rc=0
  LUCID_SHARED=${LUCID_SHARED:-$root/shared} bash "$root/bench/scale_workload.sh" "$work" "$n" || return 1
  peer_site
  mkdir -p "$out/scale"
  export CUBLAS_WORKSPACE_CONFIG=:4096:8
  for arm in ${LUCID_SCALE_ARMS:-ram disk none gpu ultralytics}; do
    local log="$out/scale/$arm.log"
    local common=(data="$work/data.yaml" model=yolo26n-seg.yaml epochs="$epochs" batch=64 imgsz=640 optimizer=MuSGD
                  close_mosaic=0 warmup_epochs=1 workers=16 device=0 plots=False project=/tmp/lucid-scale-runs
                  name="$arm" exist_ok=True)
    case $arm in
      ultralytics)
        PYTHONPATH=/tmp/peer-site${PYTHONPATH:+:$PYTHONPATH} "$LUCID_PYTHON" "$root/bench/peak_memory.py" \
          "$LUCID_PYTHON" "$root/bench/ultralytics_fit.py" --data "$work/data.yaml" --out /tmp/peer-scale \
          --name scale --epochs "$epochs" --batch 64 --workers 16 > "$log" 2>&1 || rc=1
        echo "ultralytics: $(grep -h '^{' "$log" | tail -2 | tr '\n' ' ')" ;;
      ram|disk|none|gpu)
        local cache=ram extra=()
        [ $arm = disk ] && cache=disk
        [ $arm = none ] && cache=False
        [ $arm = gpu ] && extra=(gpu_augment=True)
        if [ $arm = disk ]; then  # the cache file is built by a first run of its own, timed
          rm -rf /tmp/lucid-scale-cache; local s; s=$(date +%s.%N)
          LUCID_CACHE_DIR=/tmp/lucid-scale-cache "$LUCID_BUILD_DIR/lucid" train "${common[@]}" cache=disk epochs=1 \
            time=0.0001 name=disk-build > "$out/scale/disk-build.log" 2>&1 || rc=1
          echo "disk cache build run: $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $s}") s (a fit stopped after its first step), $(du -sh /tmp/lucid-scale-cache | cut -f1)"
        fi
        LUCID_CACHE_DIR=/tmp/lucid-scale-cache "$LUCID_PYTHON" "$root/bench/peak_memory.py" "$LUCID_BUILD_DIR/lucid" train \
          "${common[@]}" cache=$cache "${extra[@]}" > "$log" 2>&1 || rc=1
        local report=/tmp/lucid-scale-runs/$arm/fit_report.json
        echo "$arm (cache=$cache ${extra[*]}): $(grep -h 'complete fit:' "$log"); $(grep -h '^loader wait' "$log"); $(grep -h '^step time' "$log"); $(grep -h 'peak GPU memory' "$log"); $(tail -1 "$log")"
        grep -h -E "prepared images|^replay: recorded|^replay: \{" "$log" | cut -c1-200 | head -12
        "$LUCID_PYTHON" -c "import json; w=json.load(open('$report'))['loader_wait']; print('  images/s over the epochs: %.1f ($n images x $epochs epochs, %d steps in %.1f s)' % ($n * $epochs / w['epochs_s'], w['steps'], w['epochs_s']))" 2>/dev/null ;;
      *) echo "unknown scale arm $arm"; rc=1 ;;
    esac
  done
  return $rc
}
for b in "${benches[@]}"; do
  case "$b" in
    model_step) "$LUCID_BUILD_DIR/bench/bench_model_step" batch=${LUCID_STEP_BATCHES:-4,16,64} imgsz=640 steps=50 warmup=15 mode=native,graph > "$out/bench-model_step.log" 2>&1 || status=1 ;;
    floor) # The deterministic floor of the step (the fits' settings), with cuDNN's depthwise convolutions
           # and with lucid's kernels (model/depthwise.h).
           for dw in ${LUCID_FLOOR_DW:-0 1}; do
             LUCID_DEPTHWISE_KERNELS=$dw "$LUCID_BUILD_DIR/bench/bench_model_step" batch=${LUCID_STEP_BATCHES:-4,16,64} \
               imgsz=640 steps=50 warmup=15 mode=graph deterministic=True kernel_times=${LUCID_FLOOR_KERNEL_STEPS:-0} \
               kernel_rows=${LUCID_FLOOR_KERNEL_ROWS:-40} \
               > "$out/bench-floor-dw$dw.log" 2>&1 || status=1
           done ;;
    loader|loader_gpu)
            work=${LUCID_WORKLOAD:-/tmp/lucid-workload}
            [ -f "$work/data.yaml" ] || bash "${LUCID_SHARED:-$root/shared}/bench/make-workload.sh" "$work" > /dev/null
            if [ "$b" = loader ]; then args=(--workers 1,2,4,8,12,16); else args=(--workers 1,2,4,8,16 --pixels device --device cuda); fi
            "$LUCID_BUILD_DIR/bench/bench_loader" --data "$work/data.yaml" "${args[@]}" --batches 96 \
              --reps 5 > "$out/bench-$b.log" 2>&1 || status=1 ;;
    fit) LUCID_SHARED=${LUCID_SHARED:-$root/shared} "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" \
           /tmp/lucid-workload "$out/fit" "${LUCID_FIT_RUNS:-2}" capture_step=False > "$out/bench-fit.log" 2>&1 || status=1 ;;
    fit_replay) LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-fit-replay \
           "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" /tmp/lucid-workload "$out/fit_replay" \
           "${LUCID_FIT_RUNS:-2}" capture_network=True capture_segment_heads=True capture_optimizer=True \
           > "$out/bench-fit_replay.log" 2>&1 || status=1
         grep -h "^replay:" "$out"/fit_replay/fit-*.log >> "$out/bench-fit_replay.log" ;;
    fit_step) LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-fit-step \
           "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" /tmp/lucid-workload "$out/fit_step" \
           "${LUCID_FIT_RUNS:-2}" capture_step=True > "$out/bench-fit_step.log" 2>&1 || status=1
         grep -h "^replay:" "$out"/fit_step/fit-*.log >> "$out/bench-fit_step.log" ;;
    stages) # The workload fit natively and with every recording, each stage timed (stage_times=True).
         for arm in native replay; do
           extra=(capture_step=False); [ $arm = replay ] && extra=(capture_network=True capture_segment_heads=True capture_optimizer=True)
           LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-stages-$arm \
             "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" /tmp/lucid-workload /tmp/lucid-stages-out/$arm 1 \
             stage_times=True "${extra[@]}" || status=1
           echo "== $arm"; sed -n '/^stage times/,$p' /tmp/lucid-stages-out/$arm/fit-1.log | head -16
         done > "$out/bench-stages.log" 2>&1 ;;
    trace) # Nsight Systems: a 2-epoch replay fit of the workload, NVTX ranges summed per stage.
           nsys=$(command -v nsys || ls /opt/nvidia/nsight-*/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
           if [ -z "$nsys" ]; then echo "trace: no nsys on this machine" > "$out/bench-trace.log"; else
             work=${LUCID_WORKLOAD:-/tmp/lucid-workload}
             [ -f "$work/data.yaml" ] || bash "${LUCID_SHARED:-$root/shared}/bench/make-workload.sh" "$work" > /dev/null
             mkdir -p /tmp/lucid-trace
             { echo "nsys: $nsys"
               timeout 240 "$nsys" profile -t cuda,nvtx -o /tmp/lucid-trace/fit --force-overwrite true \
                 "$LUCID_BUILD_DIR/lucid" train data="$work/data.yaml" model=yolo26n-seg.yaml epochs=2 batch=4 imgsz=640 \
                 optimizer=MuSGD close_mosaic=0 warmup_epochs=1 workers=4 cache=ram device=0 project=/tmp/lucid-trace \
                 name=run exist_ok=True plots=False capture_network=True capture_segment_heads=True capture_optimizer=True \
                 2>&1 | tail -5
               ls -la /tmp/lucid-trace
               timeout 120 "$nsys" stats --report nvtx_sum,cuda_gpu_kern_sum --format csv \
                 /tmp/lucid-trace/fit.nsys-rep 2>&1 | head -80; } > "$out/bench-trace.log" 2>&1 || status=1
           fi ;;
    screens)
         work=$(workload)
         peer_site
         mkdir -p "$out/screens"
         for sc in ${LUCID_SCREENS:-b4e5 b16e3 b64e3}; do
           batch=${sc#b}; batch=${batch%e*}; epochs=${sc#*e}; workers=4; [ "$batch" -ge 64 ] && workers=16
           for arm in ${LUCID_ARMS:-ultralytics native stages step}; do
             log="$out/screens/$sc-$arm.log"
             kind=${arm%%[0-9]*}
             case $kind in
               ultralytics) PYTHONPATH=/tmp/peer-site${PYTHONPATH:+:$PYTHONPATH} "$LUCID_PYTHON" "$root/bench/ultralytics_fit.py" \
                              --data "$work/data.yaml" --out /tmp/peer-runs --name "$sc" --epochs "$epochs" --batch "$batch" \
                              --workers "$workers" > "$log" 2>&1 || status=1
                            echo "$sc ultralytics: $(tail -1 "$log")" ;;
               native|default|stages|step|dwkernels|dwnative|cudnn|cudnnnative)
                 # native: capture_step=False; default: no capture option (capture_step on by default);
                 # dwkernels, dwnative (cudnn, cudnnnative): default and native with lucid's depthwise
                 # convolution kernels (cuDNN's), LUCID_DEPTHWISE_KERNELS=1 (=0), model/depthwise.h.
                 extra=(); [ "${kind%native}" != "$kind" ] && extra=(capture_step=False)
                 dw=${LUCID_DEPTHWISE_KERNELS-}; [ "${kind#dw}" != "$kind" ] && dw=1; [ "${kind#cudnn}" != "$kind" ] && dw=0
                 [ $kind = stages ] && extra=(capture_network=True capture_segment_heads=True capture_optimizer=True)
                 [ $kind = step ] && extra=(capture_step=True)
                 LUCID_DEPTHWISE_KERNELS=$dw LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-screens-$sc-$arm \
                   "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" "$work" /tmp/lucid-screens-out/$sc-$arm 1 \
                   batch="$batch" epochs="$epochs" workers="$workers" "${extra[@]}" > "$log" 2>&1 || status=1
                 cat /tmp/lucid-screens-out/$sc-$arm/fit-1.log >> "$log"
                 echo "$sc $arm: $(grep -m1 '^run 1' "$log"); $(grep -m1 'sha256 last' "$log" | tr -s ' ')"
                 grep -h "^replay:" "$log" | cut -c1-400 ;;
               *) echo "unknown arm $arm"; status=1 ;;
             esac
           done
         done > "$out/bench-screens.log" 2>&1 ;;
    kernels)
         work=$(workload)
         mkdir -p "$out/kernels"
         for sc in ${LUCID_SCREENS:-b4e5 b16e3 b64e3}; do
           batch=${sc#b}; batch=${batch%e*}; workers=4; [ "$batch" -ge 64 ] && workers=16
           for arm in ${LUCID_KERNEL_ARMS:-native step}; do
             extra=(capture_step=False); [ $arm = step ] && extra=(capture_step=True)
             log="$out/kernels/$sc-$arm.log"
             LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-kernels-$sc-$arm \
               "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" "$work" /tmp/lucid-kernels-out/$sc-$arm 1 \
               batch="$batch" epochs=2 workers="$workers" kernel_times="${LUCID_KERNEL_STEPS:-16}" "${extra[@]}" \
               > "$log" 2>&1 || status=1
             cat /tmp/lucid-kernels-out/$sc-$arm/fit-1.log >> "$log"
             cp /tmp/lucid-kernels-$sc-$arm/fit1/fit_report.json "$out/kernels/$sc-$arm.json" || status=1
             echo "== $sc $arm (batch $batch)"
             sed -n '/^kernel times over/,/^[^ ]/p' "$log" | head -70
           done
         done > "$out/bench-kernels.log" 2>&1 ;;
    ddp)
         work=$(workload)
         peer_site
         mkdir -p "$out/ddp"
         gpus=$(nvidia-smi -L | wc -l)
         images=$(find "$work" -path '*train*' \( -name '*.jpg' -o -name '*.png' \) | wc -l)
         { echo "GPUs: $gpus, training images: $images"
           for sc in ${LUCID_DDP_SCREENS:-ref b64}; do
             if [ $sc = ref ]; then per=4; epochs=5; workers=4; else per=64; epochs=3; workers=16; fi
             for arm in ${LUCID_DDP_ARMS:-native step ultralytics}; do
               [ $arm = ultralytics ] && continue
               extra=(capture_step=False); [ $arm = step ] && extra=(capture_step=True)
               base=""
               for w in ${LUCID_DDP_WORLDS:-1 2 4}; do
                 [ "$w" -le "$gpus" ] || continue
                 dev=$(seq -s, 0 $((w - 1)))
                 log="$out/ddp/$sc-$arm-w$w.log"
                 LUCID_SHARED=${LUCID_SHARED:-$root/shared} LUCID_RUNS=/tmp/lucid-ddp-$sc-$arm-w$w \
                   "$root/bench/fit_workload.sh" "$LUCID_BUILD_DIR/lucid" "$work" /tmp/lucid-ddp-out/$sc-$arm-w$w 1 \
                   batch=$((per * w)) epochs=$epochs workers=$workers device="$dev" "${extra[@]}" > "$log" 2>&1 || status=1
                 cat /tmp/lucid-ddp-out/$sc-$arm-w$w/fit-1.log >> "$log"
                 fit=$(grep -m1 -o 'complete fit: [0-9.]*' "$log" | grep -o '[0-9.]*$')
                 rate=$(awk -v n="$images" -v e="$epochs" -v f="$fit" -v w="$w" 'BEGIN{ if (f > 0) printf "%.1f", n * e / f / w }')
                 [ -z "$base" ] && base=$rate
                 eff=$(awk -v r="$rate" -v b="$base" 'BEGIN{ if (b > 0) printf "%.0f%%", 100 * r / b }')
                 echo "$sc $arm world $w (batch $((per * w))): complete fit ${fit} s, ${rate} images/s per GPU, scaling efficiency $eff; $(grep -m1 'sha256 last' "$log" | tr -s ' ')"
                 grep -h "^replay:" "$log" | cut -c1-300
                 grep -h "^world: rank" "$log"
               done
             done
             log="$out/ddp/$sc-ultralytics-w2.log"
             if [ "$gpus" -ge 2 ] && [[ " ${LUCID_DDP_ARMS:-ultralytics} " == *" ultralytics "* ]]; then
               PYTHONPATH=/tmp/peer-site${PYTHONPATH:+:$PYTHONPATH} "$LUCID_PYTHON" "$root/bench/ultralytics_fit.py" \
                 --data "$work/data.yaml" --out /tmp/peer-ddp-runs --name "$sc" --epochs "$epochs" --batch $((per * 2)) \
                 --workers "$workers" --device 0,1 > "$log" 2>&1 || status=1
               fit=$(tail -1 "$log" | "$LUCID_PYTHON" -c "import json,sys; print(json.loads(sys.stdin.read())['complete_fit_s'])" 2>/dev/null)
               echo "$sc ultralytics DDP device=0,1 (batch $((per * 2))): complete fit ${fit} s, $(awk -v n="$images" -v e="$epochs" -v f="$fit" 'BEGIN{ if (f > 0) printf "%.1f", n * e / f / 2 }') images/s per GPU"
             fi
           done; } > "$out/bench-ddp.log" 2>&1 ;;
    predict)
         w=${LUCID_PREDICT_MODEL:?set LUCID_PREDICT_MODEL to the weights to time}
         img=${LUCID_PREDICT_IMAGE:-${LUCID_SHARED:-$root/shared}/data/coco128-seg/images/train2017/000000000009.jpg}
         peer_site
         mkdir -p "$out/predict"
         { "$LUCID_BUILD_DIR/lucid" bench predict model="$w" imgsz=640 batch=1,16 device=0 source="$img" || status=1
           for b in 1 16; do
             s=$(date +%s)
             PYTHONPATH=/tmp/peer-site${PYTHONPATH:+:$PYTHONPATH} "$LUCID_BUILD_DIR/lucid" export model="$w" format=aoti \
               imgsz=640 batch=$b device=0 out=/tmp/lucid-b$b.pt2 > "$out/predict/export-b$b.log" 2>&1 || status=1
             echo "aoti export batch $b: $(( $(date +%s) - s )) s"
             "$LUCID_BUILD_DIR/lucid" bench predict model=/tmp/lucid-b$b.pt2 batch=$b device=0 source="$img" || status=1
           done; } > "$out/bench-predict.log" 2>&1 ;;
    scale) scale_bench > "$out/bench-scale.log" 2>&1 || status=1 ;;
    pairs) pairs pairs batch=4 epochs=5 > "$out/bench-pairs.log" 2>&1 || status=1 ;;
    pairs16) pairs pairs16 batch=16 epochs=3 > "$out/bench-pairs16.log" 2>&1 || status=1 ;;
    *) echo "unknown bench $b"; status=1 ;;
  esac
  cat "$out/bench-$b.log"
done
exit $status
