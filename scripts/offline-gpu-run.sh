#!/usr/bin/env bash
# The reproduce on a GPU node with no package index and a cap on what one transfer carries
# (docs/offline-nodes.md, "FA4 on an offline node"), in steps that each fit one transfer. The wheels
# come from a machine with an index:
#
#   bash scripts/offline-gpu-run.sh fetch     # (with an index) .whl/: FA3 and the suite's wheels;
#                                             # .carry/p1, .carry/p1b: FA4's libraries in pieces
#                                             # (PIECE_MIB each, default 30); .carry/p2: its wheels
#   bash scripts/offline-gpu-run.sh part1     # (node) the pieces carried wait in STAGE: once with
#                                             #        [carry .carry/p1], once with [carry .carry/p1b]
#   bash scripts/offline-gpu-run.sh setup     # (node) the pieces joined, the wheels, an import check
#                                             #        [carry .whl .carry/p2]
#   bash scripts/offline-gpu-run.sh setup-fa3 # (node) the wheels and FA3 without FA4 [carry .whl]:
#                                             #        enough for kernel, ab, check and source
#   bash scripts/offline-gpu-run.sh smoke     # (node) bench on five scenarios beside FA3, FA4, cuDNN
#   bash scripts/offline-gpu-run.sh check     # (node) the Hopper kernel on every input distribution,
#                                             #        through the pass rule, and the growing-max test
#   bash scripts/offline-gpu-run.sh kernel    # (node) the Hopper kernel's GPU tests (rows one key dominates,
#                                             #        a growing row max), the extended set on every
#                                             #        distribution (not with SKIP_EXT=1), and v20 and the
#                                             #        variants in BESIDE each checked on its own, under
#                                             #        a time limit (GATE_ROWS; *_TIMEOUT, then SIGKILL after KILL_AFTER); KNOBS adds variants
#                                             #        of the kernel file with the A/B knobs set, e.g.
#                                             #        KNOBS="w2:KS_D128_WIDE_PV=2 c2k:KS_D128_WIDE_PV=1,KS_D128_CAUSAL_LONG_FROM=2048"
#                                             #        (/tmp/w2.cu, /tmp/c2k.cu; the 'knobs' step writes them alone,
#                                             #        'knobs-build' builds them where nvcc is, no GPU needed;
#                                             #        'knobs-pack' builds them, the control and the kernel
#                                             #        file into .carry/kc/kc.tar.xz: carried, 'kernel' and
#                                             #        'ab' find them built instead of running nvcc there)
#   bash scripts/offline-gpu-run.sh ab        # (node) a timing beside FA3 and the variants that passed
#                                             #        that check, every output checked (ROWS, AB_INPUTS),
#                                             #        and a control: the kernel file as a library of its
#                                             #        own ('control' writes it; AB_CONTROL=0: none)
#   bash scripts/offline-gpu-run.sh sandbox   # (node) CUDA and FA3 under the evaluator's sandbox (the probe),
#                                             #        the profiler's check and the self-check under Landlock
#                                             #        (of the shipped kernel; SELFCHECK_KERNEL= for the task's own),
#                                             #        both into results/<arch>/agents-selfcheck (PROBE_ONLY=1:
#                                             #        the probe alone; SKIP_PROBE=1: without it)
#   bash scripts/offline-gpu-run.sh profile   # (node) Nsight Compute on the Hopper kernel and FA3, side by
#                                             #        side, on PROFILE_ROWS (scripts/profile-beside.py)
#   bash scripts/offline-gpu-run.sh source    # (node) where the warps wait, per SASS instruction, ours and FA3's
#                                             #        (scripts/profile-source.py on SOURCE_ROW)
#   bash scripts/offline-gpu-run.sh reproduce # (node) the whole reproduce; results/<arch> archived in $OUT
#
# Everything lands under /tmp/site (FA4) and SITE2 (default /tmp/site2: the rest), which the node keeps
# while it is up.
# OUT (a folder for what comes back, default /tmp/out) and ARCH (sm90) can be set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
ARCH=${ARCH:-sm90}
mkdir -p "$OUT"
SO=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
SITE2=${SITE2:-/tmp/site2}
WHL=${WHL:-.whl}
env_here() {
  export PYTHONPATH=$SITE2:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
  export KERNELSEEK_GIT_SHA=${KERNELSEEK_GIT_SHA:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
}
ks() { python3 -m kernelseek_suite.cli "$@"; }
# the suite's wheels (WHL/*.whl), FA3 (WHL/fa3-fwd.tar.xz, where 'fetch' brought it) and a link to the
# suite itself, into SITE2
site2_install() {
  mkdir -p "$SITE2" &&
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE2" "$WHL"/*.whl &&
    { [ ! -f "$WHL/fa3-fwd.tar.xz" ] || tar xJf "$WHL/fa3-fwd.tar.xz" -C "$SITE2"; } &&
    ln -sfn "$PWD/suite" "$SITE2/kernelseek_suite"
}
# a command under a time limit of $1 seconds, killed (SIGKILL) 10 s after its SIGTERM (KILL_AFTER): the
# suite's commands take SIGTERM in Python, which never runs while a hung kernel holds the main thread in
# a CUDA call, so a variant that hangs would otherwise hold the step until the call's own limit
bounded() { local limit=$1; shift; timeout -k "${KILL_AFTER:-10}" "$limit" "$@"; }
# v20, the last version timed on the whole grid, into /tmp/v20.cu: only where git history is here (a node
# gets a copy of the working tree without it; BESIDE then names a copy)
v20_file() { git show 855b6b0:kernels/hopper/flash_fwd_sm90.cu > /tmp/v20.cu 2>/dev/null; }
# the SM clock, power and the reasons the clock is held down, every 200 ms, into $OUT/$1 while a step
# runs (read only: nothing about the GPU's settings changes); smi_stop ends it
smi_start() {
  local q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu
  nvidia-smi --query-gpu=$q,clocks_event_reasons.active --format=csv,noheader -i 0 >/dev/null 2>&1 &&
    q=$q,clocks_event_reasons.active
  nvidia-smi --query-gpu=$q --format=csv -lms 200 -i 0 > "$OUT/$1" 2>&1 &
  SMI_PID=$!
}
smi_stop() { [ -n "${SMI_PID:-}" ] && kill "$SMI_PID" 2>/dev/null; SMI_PID=; }
# the variants that KNOBS names ("name:KS_X=V,KS_Y=W ..."), each the kernel file with its #defines before it
# (kernels/hopper/flash_fwd_sm90.cu, "A/B knobs"), written to $KNOB_DIR/name.cu (default /tmp); their paths
knob_variants() {
  local spec name kv
  for spec in ${KNOBS:-}; do
    name=${spec%%:*}
    case "$name" in ''|*[!A-Za-z0-9_-]*) echo "KNOBS: a bad name in '$spec'" >&2; return 2;; esac
    { for kv in $(echo "${spec#*:}" | tr ',' ' '); do
        case "$kv" in KS_*=?*) ;; *) echo "KNOBS: not KS_NAME=VALUE: '$kv'" >&2; return 2;; esac
        grep -q "^#ifndef ${kv%%=*}\b" kernels/hopper/flash_fwd_sm90.cu ||
          { echo "KNOBS: the kernel file has no knob ${kv%%=*}" >&2; return 2; }
        echo "#define ${kv%%=*} ${kv#*=}"
      done
      cat kernels/hopper/flash_fwd_sm90.cu; } > "${KNOB_DIR:-/tmp}/$name.cu" || return 2
    echo "${KNOB_DIR:-/tmp}/$name.cu"
  done
}

# FA4's archives (.carry/part1.tar.xz: its large library; .carry/part2.tar.xz: the rest of that wheel)
# cut so that each transfer also holds the working tree (64 MiB in all): part1 in pieces of PIECE_MIB
# (default 30), the first in .carry/p1, the others and part2 in .carry/p1b; .carry/p2/pieces: how many
pack_pieces() {
  rm -rf .carry/p1 .carry/p1b && mkdir -p .carry/p1 .carry/p1b .carry/p2 &&
    split -b "${PIECE_MIB:-30}M" -d -a 2 .carry/part1.tar.xz .carry/p1b/part1.tar.xz. &&
    mv .carry/p1b/part1.tar.xz.00 .carry/p1/ && mv .carry/part2.tar.xz .carry/p1b/ &&
    n=0 && for f in .carry/p1/part1.tar.xz.* .carry/p1b/part1.tar.xz.*; do n=$((n + 1)); done &&
    echo "$n" > .carry/p2/pieces && rm -f .carry/part1.tar.xz
}

# where a piece is on the node: left in STAGE (default /tmp/stage) by a part1 call, or carried now
piece_path() {
  local d
  for d in "${STAGE:-/tmp/stage}" .carry/p1 .carry/p1b .carry/p2; do [ -f "$d/$1" ] && { echo "$d/$1"; return 0; }; done
  return 1
}

# the pieces of FA4's library in order, one path a line, then part2's; exit 1 naming what is missing
joined_pieces() {
  local i p missing=""
  [ -s .carry/p2/pieces ] || { echo "missing: .carry/p2/pieces (carry .carry/p2)" >&2; return 1; }
  for i in $(seq -f %02g 0 $(( $(cat .carry/p2/pieces) - 1 ))); do
    p=$(piece_path "part1.tar.xz.$i") && echo "$p" || missing="$missing part1.tar.xz.$i"
  done
  p=$(piece_path part2.tar.xz) && echo "$p" || missing="$missing part2.tar.xz"
  [ -z "$missing" ] || { echo "missing:$missing: run 'part1' with each of .carry/p1, .carry/p1b first" >&2; return 1; }
}

# the builds 'knobs-pack' made where nvcc is (KC_OUT/kc.tar.xz, default .carry/kc), when carried here:
# unpacked into a build cache that KERNELSEEK_CACHE then names, so that a variant whose source is byte for
# byte the same is not compiled again (the cache's key is the source, the flags and nvcc's version; a
# different nvcc here finds nothing and builds as usual)
# (KC_DIR, default /tmp/kcache); the GPU tests' own cache (.pytest_cache/kernelseek-suite) gets them too
use_packed_builds() {
  local kc=${KC_OUT:-.carry/kc}/kc.tar.xz dir=${KC_DIR:-/tmp/kcache}
  [ -f "$kc" ] || return 0
  mkdir -p "$dir" .pytest_cache/kernelseek-suite && tar xJf "$kc" -C "$dir" &&
    cp -r "$dir/build" .pytest_cache/kernelseek-suite/ && export KERNELSEEK_CACHE=$dir &&
    echo "builds from $kc: $(ls "$dir/build" | wc -l) in $dir"
}

# (where nvcc is) the files after $1 built as the harness builds them, four at a time: "built: F" or
# "refused: F: why" for each, exit 1 if any is refused; where $1 names an archive, their build folders
# (without the PTX) are packed into it as build/KEY/..., the layout of a build cache (use_packed_builds)
build_variants() {
  "${PYTHON:-python3}" - "$@" <<'PY'
import pathlib, sys, tarfile
from concurrent.futures import ThreadPoolExecutor
from kernelseek_suite.build import BuildError, build
out, files = sys.argv[1], sys.argv[2:]
def one(f):
    try:
        return build(pathlib.Path(f), "sm90")
    except BuildError as e:
        return e
with ThreadPoolExecutor(4) as pool:
    built = list(pool.map(one, files))
for f, r in zip(files, built):
    print(f"refused: {f}: " + " ".join(str(r).split())[:300] if isinstance(r, BuildError) else f"built: {f}")
if any(isinstance(r, BuildError) for r in built):
    sys.exit(1)
if out:
    done = set()
    with tarfile.open(out, "w:xz") as tar:
        for f, r in zip(files, built):
            d = pathlib.Path(r.library).parent
            if d not in done:  # byte-identical sources share one build
                done.add(d)
                for p in sorted(d.iterdir()):
                    if p.name != "kernel.ptx":
                        tar.add(p, arcname=f"build/{d.name}/{p.name}")
            print(f"packed: {f} (build/{d.name})")
    print(f"{out}: {pathlib.Path(out).stat().st_size / 2**20:.1f} MiB, {len(done)} builds")
PY
}

# the trace an agent check's output names (its last "trace: PATH" line) copied as $2 beside the output
# ($1) and into $OUT; a trace that is gone is said, not an error
keep_trace() {
  local t
  t=$(sed -n 's/^trace: \([^ ]*\.jsonl\).*/\1/p' "$1" | tail -1)
  if [ -n "$t" ] && [ -f "$t" ]; then cp "$t" "$(dirname "$1")/$2" && cp "$t" "$OUT/$2" && echo "kept $t as $2"
  else echo "no trace to keep from $1 (${t:-none named})"; fi
}
# the timing's control: the kernel file with a comment appended, written to $KNOB_DIR/control.cu (default
# /tmp): the same code in a library of its own (the build cache keys on the source, and a byte-identical
# copy loads as the same library), so its ratio to the kernel is the timing's own spread plus what a
# library's place does (kernels/hopper/NOTES.md, runs 49-51); its path
control_variant() {
  { cat kernels/hopper/flash_fwd_sm90.cu
    echo "// control: this file as shipped, built as a library of its own"; } > "${KNOB_DIR:-/tmp}/control.cu" || return 2
  echo "${KNOB_DIR:-/tmp}/control.cu"
}

case "${1:-}" in
  fetch)
    dl=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform any)
    mkdir -p .whl .carry/fa4
    "${dl[@]}" -d .whl fa3-fwd==0.0.3 pyelftools jsonschema attrs referencing rpds-py jsonschema-specifications \
      safetensors pytest pluggy iniconfig landlock==1.0.0.dev5 bm25s  # bm25s: the tool-rich arm's retrieval
    # FA3's wheel (28 MB, deflate) as an xz archive of its files (9 MB): the wheels, FA4's second part and
    # the working tree then fit one transfer, so one call does the whole setup
    for w in .whl/fa3_fwd-*.whl; do
      [ -f "$w" ] || continue
      rm -rf .carry/x && python3 -m zipfile -e "$w" .carry/x && (cd .carry/x && tar cf - . | xz -9e -T0 > ../../.whl/fa3-fwd.tar.xz)
      rm -rf .carry/x "$w"
    done
    "${dl[@]}" -d .carry/fa4 flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
      nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 quack-kernels==0.6.5 \
      apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
    rm -rf .carry/x && python3 -m zipfile -e .carry/fa4/nvidia_cutlass_dsl_libs_cu13-*.whl .carry/x
    (cd .carry/x && tar cf - "$SO" | xz -9 -T0 > ../part1.tar.xz)
    (cd .carry/x && tar cf - --exclude="$(basename "$SO")" . | xz -9 -T0 > ../part2.tar.xz)
    rm -rf .carry/x
    pack_pieces
    for w in .carry/fa4/*.whl; do case "$w" in *libs_cu13*) ;; *) cp "$w" .carry/p2/ ;; esac; done
    du -sh .whl .carry/p1 .carry/p1b .carry/p2
    ;;
  repack)
    # (here) the pieces cut again (PIECE_MIB) when the working tree has grown: joined from .carry/p1,
    # .carry/p1b and .carry/p2 (where an older layout kept the second piece and part2), then pack_pieces
    join=() p2=""
    for f in .carry/p1/part1.tar.xz.* .carry/p1b/part1.tar.xz.* .carry/p2/part1.tar.xz.*; do
      [ -f "$f" ] && join+=("$f")
    done
    for f in .carry/p1b/part2.tar.xz .carry/p2/part2.tar.xz; do [ -f "$f" ] && p2=$f; done
    [ ${#join[@]} -gt 0 ] && printf '%s\n' "${join[@]}" | awk -F/ '{print $NF "\t" $0}' | sort | cut -f2 |
      xargs cat > .carry/part1.tar.xz || exit 2
    [ -s .carry/part1.tar.xz ] && [ -n "$p2" ] || { echo "no pieces to join: run 'fetch'"; exit 2; }
    mv "$p2" .carry/part2.tar.xz && rm -f .carry/p2/part1.tar.xz.* .carry/p2/part2.tar.xz && pack_pieces
    du -sh .carry/p1 .carry/p1b .carry/p2
    ;;
  part1)
    # the pieces carried (.carry/p1, .carry/p1b: one call each) wait in STAGE (default /tmp/stage) for setup
    stage=${STAGE:-/tmp/stage}
    mkdir -p "$stage" && for d in .carry/p1 .carry/p1b; do [ -d "$d" ] && cp "$d"/* "$stage"/; done
    ls -la "$stage"
    nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
    ;;
  setup-fa3)
    # (node) the suite's wheels and FA3 without FA4 (carry .whl alone): enough for 'kernel', 'ab',
    # 'check' and 'source', whose baseline is FA3
    site2_install || { echo "the wheels or FA3 did not install into $SITE2"; exit 7; }
    chmod -R a+rX "$SITE2"
    ls "$SITE2"
    ;;
  setup)
    # FA4's libraries from the pieces the part1 calls left (or carried now), joined in order
    list=$(joined_pieces) || exit 7
    mapfile -t pieces < <(echo "$list" | head -n -1)
    p2=$(echo "$list" | tail -n 1)
    mkdir -p /tmp/site && cat "${pieces[@]}" | tar xJf - -C /tmp/site &&
      test -f "/tmp/site/$SO" || { echo "FA4's library did not unpack"; exit 7; }
    tar xJf "$p2" -C /tmp/site
    for w in .carry/p2/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
    site2_install
    # the sealed evaluations run as another user (uid 65533 where this is root): what they import must be
    # readable by it, whatever this shell's umask left
    echo "umask $(umask): $(stat -c '%a %U' "$SITE2" "$SITE2/fa3_fwd/_C.abi3.so" 2>/dev/null | tr '\n' ' ')"
    chmod -R a+rX /tmp/site "$SITE2"
    env_here
    python3 -c "from flash_attn.cute import flash_attn_func; import fa3_fwd_interface, elftools, jsonschema, bm25s; print('imports ok')"
    ;;
  smoke)
    env_here
    ks bench --kernel kernels/hopper/flash_fwd_sm90.cu --baseline fa3 --baseline fa4 --baseline cudnn \
      --scenarios 'd64-h32kv32-s512,d128-h16kv16-s8192-causal,d256-h8kv1-s2048,d96-h16kv16-s32768,d192v128-h16kv16-s1024-causal' \
      --out /tmp/smoke 2>&1 | tee "$OUT/smoke.txt" | tail -25
    cp /tmp/smoke/bench.jsonl /tmp/smoke/summary.json "$OUT/" 2>/dev/null
    ;;
  check)
    env_here
    python3 -m kernelseek_suite.cli run-once kernels/hopper/flash_fwd_sm90.cu '*-s512,*-s2048-causal,*-s8192' \
      --inputs all --check > "$OUT/check.txt" 2>&1
    echo "run_once rc=$?: $(grep -c ': ok' "$OUT/check.txt") ok, $(grep -c 'WRONG' "$OUT/check.txt") wrong"
    python3 -m pytest -q -p no:cacheprovider tests/test_hopper_growing_max.py 2>&1 | tail -3
    ;;
  kernel)
    env_here
    use_packed_builds
    bounded "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_hopper_dominated_rows.py \
      tests/test_hopper_growing_max.py \
      2>&1 | tee "$OUT/kernel-tests.txt" | tail -3
    if [ -z "${SKIP_EXT:-}" ]; then  # (the reproduce checks the extended set too: SKIP_EXT=1 after it)
      bounded "${EXT_TIMEOUT:-240}" python3 -m kernelseek_suite.cli bench --kernel kernels/hopper/flash_fwd_sm90.cu \
        --extended-only --baseline fa3 --out /tmp/ext > "$OUT/extended.txt" 2>&1
      echo "extended rc=$?"; grep -E "^correct|not correct" "$OUT/extended.txt" | head -3
    fi
    # the variants (v20, the last version timed on the grid, where git history is here, and the files
    # named in BESIDE), each built (side by side) and then checked on its own under a time limit, on one
    # row of each kind of tile, on causal rows with seqlen_q != seqlen_k and on the rows one key
    # dominates (one query row, 1000 keys: where the normalization of O shows), wide and LLM-like
    # inputs: a variant that is wrong, or that hangs, is left out of the timing (the 'ab' step) instead
    # of taking it down. The ones that passed: /tmp/ab-beside.txt
    variants=()
    if v20_file; then variants+=(/tmp/v20.cu)
    else echo "no git history here: v20 is checked and timed only if BESIDE names a copy of it"; fi
    variants+=(${BESIDE:-})
    while read -r f; do variants+=("$f"); done < <(knob_variants)
    python3 -c "import sys, pathlib; from concurrent.futures import ThreadPoolExecutor as P
from kernelseek_suite.build import build
with P(8) as pool: list(pool.map(lambda f: build(pathlib.Path(f), '$ARCH'), sys.argv[1:]))" "${variants[@]}" \
      > "$OUT/variants-build.txt" 2>&1 || echo "variants: a build failed ($OUT/variants-build.txt)"
    gate_rows=${GATE_ROWS:-d64-h32kv8-s2048,d64-h32kv32-s1024-causal,d96-h16kv16-s8192,d96-h16kv16-s8192-causal,d128-h16kv16-s2048-causal,d128-h16kv16-s8192-causal,d192v128-h16kv16-s8192,d192v128-h16kv16-s512-causal,d256-h8kv8-s512-causal,ext-d256-h8kv8-b3-q3001-k17-causal,ext-d256-h8kv8-b3-q113-k1000-causal,ext-d96-h16kv16-b3-q1000-k113-causal,ext-d192v128-h1kv1-b1-q3001-k1000-causal,ext-*-b3-q1-k1000*}
    : > /tmp/ab-beside.txt
    for f in "${variants[@]}"; do
      g="$OUT/gate-$(basename "$f" .cu).txt"
      bounded "${GATE_TIMEOUT:-90}" python3 -m kernelseek_suite.cli run-once "$f" "$gate_rows" --check --inputs wide \
        --inputs llm > "$g" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then echo "$f" >> /tmp/ab-beside.txt; echo "gate ok: $f"; else echo "gate FAILED (rc=$rc; left out of the timing): $f"; tail -3 "$g"; fi
    done
    ;;
  knobs)
    # (anywhere) the KNOBS variants' files, for a look before a call: their paths
    knob_variants || exit 2
    ;;
  control)
    # (anywhere) the timing's control file that 'ab' times beside the variants: its path
    control_variant || exit 2
    ;;
  knobs-build)
    # (where nvcc is, no GPU needed) each KNOBS variant built as the harness builds it, so that one the
    # build refuses (ptxas serializing the wgmmas, C7511) is known before a GPU call: exit 1 if any is.
    # PYTHON: a Python with the suite (default python3)
    files=$(knob_variants) || exit 2
    build_variants "" $files
    ;;
  knobs-pack)
    # (where nvcc is, no GPU needed) the KNOBS variants, the control (AB_CONTROL=0: none) and the kernel
    # file built as in knobs-build and packed, without their PTX, into KC_OUT/kc.tar.xz (default
    # .carry/kc: carry it with 'kernel' and 'ab'). Exit 1 if a build is refused
    files=$(knob_variants) || exit 2
    if [ "${AB_CONTROL:-1}" != 0 ]; then files="$files $(control_variant)" || exit 2; fi
    mkdir -p "${KC_OUT:-.carry/kc}"
    build_variants "${KC_OUT:-.carry/kc}/kc.tar.xz" $files kernels/hopper/flash_fwd_sm90.cu
    ;;
  ab)
    env_here
    use_packed_builds
    # the timing beside FA3 and the variants that passed the kernel step's gate (else BESIDE and v20),
    # every output checked (ROWS, AB_INPUTS, AB_TIMEOUT)
    beside=()
    if [ -s /tmp/ab-beside.txt ]; then
      while read -r f; do beside+=(--beside "$f"); done < /tmp/ab-beside.txt
    else
      if v20_file; then beside+=(--beside /tmp/v20.cu); fi
      for f in ${BESIDE:-}; do beside+=(--beside "$f"); done
    fi
    # the control beside them (AB_CONTROL=0: none)
    if [ "${AB_CONTROL:-1}" != 0 ]; then ctl=$(control_variant) || exit 2; beside+=(--beside "$ctl"); fi
    inputs=(); for d in ${AB_INPUTS:-standard wide}; do inputs+=(--inputs "$d"); done
    rows=${ROWS:-d64-h32kv8-s2048,d64-h32kv8-s8192,d64-h32kv8-s8192-causal,d64-h32kv32-s1024-causal,d96-h16kv16-s8192,d96-h16kv16-s32768,d96-h16kv16-s1024,d128-h16kv16-s1024,d128-h16kv16-s4096,d128-h16kv16-s2048-causal,d128-h16kv16-s16384-causal,d192v128-h16kv16-s8192,d192v128-h16kv16-s1024-causal,d192v128-h16kv16-s512-causal,d256-h8kv8-s4096,d256-h8kv8-s1024-causal,d256-h8kv8-s512-causal}
    smi_start ab-smi.csv
    bounded "${AB_TIMEOUT:-400}" python3 -m kernelseek_suite.cli run-once kernels/hopper/flash_fwd_sm90.cu "$rows" \
      --time --check --check-beside "${beside[@]}" --baseline fa3 "${inputs[@]}" > "$OUT/ab.txt" 2>&1
    echo "ab rc=$?"; smi_stop; sed -n "/, per scenario:$/,\$p" "$OUT/ab.txt"  # the tables per scenario, then the means
    ;;
  sandbox)
    env_here
    if [ -z "${SKIP_PROBE:-}" ]; then
      python3 scripts/sandbox-gpu-probe.py --quick --timeout 120 --baseline fa3 > "$OUT/probe.txt" 2>&1
      echo "probe rc=$?"; grep -E "^\[|run as" "$OUT/probe.txt"
    fi
    [ -n "${PROBE_ONLY:-}" ] && { grep -B2 -A30 "^\[baseline" "$OUT/probe.txt" | tail -60; exit 0; }
    mkdir -p "results/$ARCH/agents-selfcheck"
    # the profiler's check first (a minute), then the self-check (a whole evaluation) in the time left
    ks toolrich-check > "results/$ARCH/agents-selfcheck/toolrich-check.txt" 2>&1
    echo "toolrich-check rc=$?"; cp "results/$ARCH/agents-selfcheck/toolrich-check.txt" "$OUT/"
    tail -4 "$OUT/toolrich-check.txt"
    # the shipped kernel as the evaluation's starting kernel (SELFCHECK_KERNEL; empty: the task's own)
    sk=${SELFCHECK_KERNEL-kernels/hopper/flash_fwd_sm90.cu}
    bounded "${SELFCHECK_TIMEOUT:-420}" python3 -m kernelseek_suite.cli selfcheck --task fa-fwd-sm90 --sandbox landlock \
      ${sk:+--kernel "$sk"} > "results/$ARCH/agents-selfcheck/out.txt" 2>&1
    echo "selfcheck rc=$?"; cp "results/$ARCH/agents-selfcheck/out.txt" "$OUT/selfcheck.txt"
    tail -12 "$OUT/selfcheck.txt"
    # the run's traces (each output's last "trace: PATH" line) beside the outputs, and in $OUT
    keep_trace "results/$ARCH/agents-selfcheck/toolrich-check.txt" toolrich-trace.jsonl
    keep_trace "results/$ARCH/agents-selfcheck/out.txt" selfcheck-trace.jsonl
    ;;
  profile)
    env_here
    bounded "${PROFILE_TIMEOUT:-400}" python3 scripts/profile-beside.py \
      "${PROFILE_ROWS:-d64-h32kv8-s8192,d256-h8kv8-s1024-causal,d128-h16kv1-s1024-causal}" --out "$OUT/profile" \
      2>&1 | tee "$OUT/profile.txt" | tail -12
    ;;
  source)
    env_here
    bounded "${PROFILE_TIMEOUT:-400}" python3 scripts/profile-source.py "${SOURCE_ROW:-d128-h16kv1-s1024-causal}" --fa3 \
      --out "$OUT/source" 2>&1 | tee "$OUT/source.txt" | head -100
    ;;
  reproduce)
    env_here
    start=$(date +%s)
    smi_start reproduce-smi.csv
    ks reproduce --arch "$ARCH" --runtime native > "$OUT/reproduce.txt" 2>&1
    rc=$?
    smi_stop
    echo "reproduce rc=$rc after $(( $(date +%s) - start )) s"
    tail -20 "$OUT/reproduce.txt"
    tar czf "$OUT/$ARCH.tgz" "results/$ARCH"
    exit $rc
    ;;
  *)
    sed -n '2,/^set /p' "$0" | grep '^#'
    exit 4
    ;;
esac
