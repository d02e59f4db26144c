#!/usr/bin/env bash
# On an H100/H200: the head-to-head's final full-grid bench end to end, without a model. The agents'
# self-check writes a real fa-fwd-sm90 trace (one evaluation of KERNEL through the sealed evaluator),
# then `compare --from-traces --final-bench` benches that run's best kernel on all 182 scenarios
# against fa3 and renders the table with its `full grid` column. Prints a short summary last; the
# full outputs are under $OUT.
#
#   OUT=/tmp/out bash scripts/final-bench-check.sh
#
# KERNEL (default kernels/hopper/flash_fwd_sm90.cu) can be set. The suite must be importable by
# $PY (default: .venv/bin/python where it exists, else python3), as for `make reproduce`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ks-final-bench}
KERNEL=${KERNEL:-kernels/hopper/flash_fwd_sm90.cu}
PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
mkdir -p "$OUT"
rm -rf "$OUT/selfcheck" "$OUT/compare"
t0=$(date +%s)
"$PY" -m kernelseek_suite.cli selfcheck --task fa-fwd-sm90 --kernel "$KERNEL" \
    --trace "$OUT/selfcheck/trace.jsonl" > "$OUT/selfcheck.log" 2>&1
sc=$?
t1=$(date +%s)
"$PY" -m kernelseek_suite.cli compare --from-traces "$OUT/selfcheck" --final-bench --out "$OUT/compare" \
    > "$OUT/compare.log" 2>&1
cc=$?
t2=$(date +%s)
echo "== self-check (exit $sc, $((t1 - t0)) s)"
grep -E "^evaluation:|SELFCHECK" "$OUT/selfcheck.log"
echo "== compare --final-bench (exit $cc, $((t2 - t1)) s)"
grep -E "^  trace.jsonl|benching" "$OUT/compare.log"
sed -n '/## Per run/,$p' "$OUT/compare/compare.md" 2>/dev/null | head -6
"$PY" - "$OUT/compare/final.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"final bench: {r['status']} geomean {r['geomean']} vs {r['baseline']}, "
          f"{r['scenarios_correct']}/{r['scenarios_total']} correct, {r['wall_s']:.0f} s; {r['note']}")
PYEOF
