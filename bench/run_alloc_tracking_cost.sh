#!/usr/bin/env bash
# Allocator mode's per-allocation tracking cost, arms alternated in one run (docs/benchmarks.md).
# usage: bench/run_alloc_tracking_cost.sh [BUILD_DIR] [ITERATIONS] [ROUNDS] [LIB...]
#   With more than one LIB (libmemguard.so builds to compare, e.g. before/after a change) every
#   arm runs against each, alternated. Prints the median ns per memguard_alloc+memguard_free pair.
#   ARMS="native miss5" picks arms (default: nostack native deep python pylong); miss5 and miss50:
#   every 20th or every 2nd pair from a stack the StackMemo does not hold; nomemo5: miss5 with
#   MEMGUARD_STACK_MEMO=0.
set -euo pipefail
build=${1:-build}
iterations=${2:-200000}
rounds=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
libs=("$@")
[ ${#libs[@]} -gt 0 ] || libs=("$(cd "$build/lib" && pwd)/libmemguard.so")
exe=$build/bin/memguard_bench_alloc_tracking
blib=$(cd "$build/lib" && pwd)/libmemguard_bench_tracking.so
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
read -r -a arms <<< "${ARMS:-nostack native deep python pylong}"
run_arm() {  # arm lib
    local common=(MEMGUARD_OUTPUT="$out/r.%p.mgr" MEMGUARD_ALLOCATOR=memguard LD_PRELOAD="$2")
    case $1 in
        nostack) env "${common[@]}" MEMGUARD_STACK_DEPTH=0 MEMGUARD_PYTHON_STACKS=0 "$exe" "$iterations" 40 ;;
        native) env "${common[@]}" MEMGUARD_PYTHON_STACKS=0 "$exe" "$iterations" 40 ;;
        deep) env "${common[@]}" MEMGUARD_PYTHON_STACKS=0 "$exe" "$iterations" 120 ;;
        miss5) env "${common[@]}" MEMGUARD_PYTHON_STACKS=0 "$exe" "$iterations" 40 0 20 ;;
        miss50) env "${common[@]}" MEMGUARD_PYTHON_STACKS=0 "$exe" "$iterations" 40 0 2 ;;
        nomemo5) env "${common[@]}" MEMGUARD_PYTHON_STACKS=0 MEMGUARD_STACK_MEMO=0 "$exe" "$iterations" 40 0 20 ;;
        python) env "${common[@]}" python3 "$here/alloc_tracking_cost.py" --lib "$blib" --iterations "$iterations" ;;
        pylong) env "${common[@]}" python3 "$here/alloc_tracking_cost.py" --lib "$blib" --iterations "$iterations" \
                    --long-function 1000 ;;
    esac | awk '{print $3}'
    rm -f "$out"/r.*
}
for ((r = 0; r < rounds; ++r)); do
    for arm in "${arms[@]}"; do
        for i in "${!libs[@]}"; do
            echo "$arm $i $(run_arm "$arm" "${libs[$i]}")" >> "$out/all"
        done
    done
done
echo "host: $(uname -m), $(nproc) cores; $iterations memguard_alloc+memguard_free pairs of 1 MiB from ~40 native frames (deep: ~120; python: ~40 + 30 Python frames; pylong: the same, the innermost a 1000-line function; miss5/miss50/nomemo5: every 20th/2nd pair from one of 1024 stack positions, 70 frames deep), fake CUDA runtime; median of $rounds alternated runs"
for i in "${!libs[@]}"; do echo "lib $i: ${libs[$i]}"; done
printf '| arm | lib | ns per alloc+free (median) | runs |\n|---|---|---|---|\n'
for arm in "${arms[@]}"; do
    for i in "${!libs[@]}"; do
        vals=$(awk -v a="$arm" -v l="$i" '$1 == a && $2 == l {print $3}' "$out/all" | sort -g)
        med=$(echo "$vals" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
        printf '| %s | %s | %.0f | %s |\n' "$arm" "$i" "$med" "$(echo $vals)"
    done
done
