#!/usr/bin/env bash
# The multi-GPU measurement of the scale-out: bench of a kernel against a baseline on one GPU, then
# sharded over all GPUs of this host through dask-cuda, then the agreement of the two runs' ratios
# per GPU and the wall times. Each step resumes where an earlier call stopped, so a step that does
# not finish within one call is simply called again.
#
#   bash scripts/multi-gpu-bench.sh setup     # wheels from .whl/ (scripts/gpu-node-wheels.sh) into /tmp/site
#   bash scripts/multi-gpu-bench.sh single    # bench on GPU 0 (repeat until it says "complete")
#   bash scripts/multi-gpu-bench.sh multi     # bench on every GPU through dask-cuda (same seed)
#   bash scripts/multi-gpu-bench.sh agree     # per-GPU agreement and wall times
#
# KERNEL (default kernels/hopper/flash_fwd_sm90.cu), BASELINE (fa3), SCENARIOS (a --scenarios filter,
# default: the whole grid), SEED (20261202), RESULTS (/tmp/ks-scaleout), STEP_LIMIT_S (540: a call
# stops itself in time to copy its results) can be set. Results are copied to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
KERNEL=${KERNEL:-kernels/hopper/flash_fwd_sm90.cu}
BASELINE=${BASELINE:-fa3}
SEED=${SEED:-20261202}
RESULTS=${RESULTS:-/tmp/ks-scaleout}
STEP_LIMIT_S=${STEP_LIMIT_S:-540}
SITE=/tmp/site
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
export KERNELSEEK_GIT_SHA=${KERNELSEEK_GIT_SHA:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
ks() { python3 -m kernelseek_suite.cli "$@"; }
filter=()
[ -n "${SCENARIOS:-}" ] && filter=(--scenarios "$SCENARIOS")
mkdir -p "$RESULTS"

copy_out() {
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    for d in "$RESULTS"/*/; do
      [ -d "$d" ] || continue
      mkdir -p "$OUT/$(basename "$d")"
      cp "$d"/*.json* "$d"/*.csv "$d"/*.md "$OUT/$(basename "$d")/" 2>/dev/null
    done
    cp "$RESULTS"/*.txt "$RESULTS"/*.wall "$RESULTS"/*.json "$OUT/" 2>/dev/null
  fi
  true
}

# one call of a bench step: resumes an earlier call's rows, adds this call's seconds to NAME.wall
step() {
  local name=$1; shift
  local dir="$RESULTS/$name" resume=()
  [ -f "$dir/bench.jsonl" ] && resume=(--resume)
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout --signal=INT "$STEP_LIMIT_S" python3 -m kernelseek_suite.cli bench --kernel "$KERNEL" --baseline "$BASELINE" \
    --seed "$SEED" --out "$dir" "${filter[@]}" "${resume[@]}" "$@"
  rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" = 124 ] || [ "$rc" = 130 ]; then
    # stopped in time: let a sweep process still finishing its scenario exit before anything else runs
    for _ in $(seq 60); do
      [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break
      sleep 2
    done
  fi
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$t1" >> "$RESULTS/$name.wall"
  local want have
  want=$(ks scenarios "${filter[@]}" | tail -1 | awk '{print $1}')
  have=$(python3 -c "import json,sys; print(len({json.loads(l)['scenario'] for l in open(sys.argv[1]) if l.strip()}))" \
         "$dir/bench.jsonl" 2>/dev/null || echo 0)
  echo "$name: exit $rc, $have/$want scenarios recorded, seconds per call: $(paste -sd' ' "$RESULTS/$name.wall")"
  [ "$have" = "$want" ] && echo "$name: complete" || echo "$name: not complete: call this step again"
}

case "${1:-}" in
  setup)
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl
    ln -sfn "$PWD/suite" "$SITE/kernelseek_suite"
    nvidia-smi -L
    python3 -c "import dask, distributed, dask_cuda, fa3_fwd_interface; print('dask', dask.__version__, 'dask-cuda', dask_cuda.__version__)"
    ks env | grep -E "gpu_name|driver|torch|nvcc"
    ;;
  single)
    step single --gpu 0 ;;
  multi)
    nvidia-smi --query-gpu=index,name,uuid,clocks.sm,temperature.gpu,utilization.gpu --format=csv
    step multi --executor dask --scheduler local-cuda ;;
  agree)
    {
      for name in single multi; do
        python3 - "$RESULTS/$name.wall" "$name" <<'PY'
import sys
secs = [float(x) for x in open(sys.argv[1]).read().split()]
label = {"single": "one GPU", "multi": "all GPUs (dask-cuda)"}[sys.argv[2]]
print(f"== {label}: wall {sum(secs):.0f} s in {len(secs)} call(s): {' '.join(f'{s:.0f}' for s in secs)}")
PY
      done
      ks agreement "$RESULTS/single" "$RESULTS/multi" --baseline "$BASELINE"
      ks report "$RESULTS/single" | head -4
      ks report "$RESULTS/multi" | head -4
    } | tee "$RESULTS/agreement.txt"
    ks agreement "$RESULTS/single" "$RESULTS/multi" --baseline "$BASELINE" --json > "$RESULTS/agreement.json"
    ;;
  *)
    sed -n '2,20p' "$0"; exit 4 ;;
esac
rc=$?
copy_out
exit $rc
