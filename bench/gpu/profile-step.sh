#!/usr/bin/env bash
# Profiles the CPU-bound eager step (bench/allocator_mode.py's eager_small: d=512, 6 layers, seq 128,
# batch 4, AdamW) on the GPU machine with perf, for allocator mode with full tracking (`memguard`)
# and without stacks (`mg_nostack`): where full tracking's cost goes inside PyTorch's process.
#   here:  bash bench/gpu/stage-perf.sh
#   there: bash bench/gpu/profile-step.sh [STEPS]   (device tool: carry .deps/libunwind and .deps/perf)
# Prints, per arm, the step time and a flat profile (dso, symbol) of the whole process; for the
# `memguard` arm also what its report holds per step: tensor allocations, and the native and Python
# frames of their stacks (bench/stack_depths.py). perf data goes to $OUT (device tool) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
steps=${1:-1000}
perf=.deps/perf/perf
[ -x "$perf" ] || { echo "profile-step.sh: $perf missing: run bench/gpu/stage-perf.sh here and carry .deps/perf" >&2; exit 1; }
bench/gpu/build-lib.sh "$out/cmake-profile.log" || exit 1
lib=$PWD/build-gpu/lib/libmemguard.so
reports=$(mktemp -d)
spec='{"arm": "ARM", "bench": "step", "cpus": [4,5,6,7], "d": 512, "layers": 6, "seq": 128, "batch": 4,
       "warmup": 20, "steps": STEPS, "compiled": false}'
for arm in memguard mg_nostack; do
    # Text reports: bench/stack_depths.py reads their lines (the binary default takes ~6% fewer
    # instructions per tensor on the allocating thread: docs/benchmarks.md, "Compact records").
    env=(LD_PRELOAD="$lib" MEMGUARD_ALLOCATOR=memguard MEMGUARD_OUTPUT="$reports/$arm.%p.mgr" MEMGUARD_LOG_LEVEL=info
         MEMGUARD_REPORT_ENCODING=text)
    [ "$arm" = mg_nostack ] && env+=(MEMGUARD_STACK_DEPTH=0 MEMGUARD_PYTHON_STACKS=0)
    s=${spec//ARM/$arm}; s=${s//STEPS/$steps}
    echo "== $arm"
    if ! env "${env[@]}" "$perf" record -F 2999 -o "$out/step-$arm.data" -- \
            python3 bench/allocator_mode.py --worker "$s" "$out/step-$arm.json" 2>"$out/step-$arm.record.log"; then
        echo "perf record failed:"; tail -5 "$out/step-$arm.record.log"; continue
    fi
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('step ms', round(r['step_ms'],3), 'backend', r['backend'])" \
        "$out/step-$arm.json"
    grep -h "stack memo" "$out/step-$arm.record.log" || true
    # The last half of the samples: the timed steps, not start-up (imports, cuBLAS and NVRTC loading).
    "$perf" report -i "$out/step-$arm.data" --no-children --stdio --sort dso,symbol --percent-limit 0.2 --time 50%-100% 2>/dev/null |
        grep -E '^ +[0-9]' | cut -c1-150 | sed 's/  */ /g' >"$out/step-$arm.txt"
    head -45 "$out/step-$arm.txt"
    "$perf" report -i "$out/step-$arm.data" --no-children --stdio --sort dso --time 50%-100% 2>/dev/null |
        grep -E '^ +[0-9]' | head -12
done
python3 bench/stack_depths.py "$reports"/memguard.*.mgr --steps $((steps + 20))
cp "$lib" "$out/"
rm -rf "$reports"
