#!/usr/bin/env bash
# Side-by-side cost of a hooked cudaMalloc+cudaFree pair, in one run (docs/benchmarks.md).
# usage: bench/run_hook_cost.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
build=${1:-build}
iterations=${2:-200000}
bench=$build/bin/memguard_bench_hook_cost
lib=$(cd "$build/lib" && pwd)/libmemguard.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
measure() {  # label, then env assignments
    local label=$1; shift
    local best=""
    for _ in 1 2 3; do  # best of three: the least disturbed run
        local ns
        ns=$(env MEMGUARD_OUTPUT="$out/r.%p.mgr" "$@" "$bench" alloc "$iterations" | awk '{print $3}')
        if [ -z "$best" ] || awk "BEGIN{exit !($ns < $best)}"; then best=$ns; fi
    done
    printf '%s\t%s\n' "$label" "$best"
}
{
    measure "no memguard" 
    measure "memguard, MEMGUARD_ENABLE=0" LD_PRELOAD="$lib" MEMGUARD_ENABLE=0
    measure "memguard, no stacks (MEMGUARD_STACK_DEPTH=0)" LD_PRELOAD="$lib" MEMGUARD_STACK_DEPTH=0
    measure "memguard, 64-frame stacks (default)" LD_PRELOAD="$lib"
} > "$out/table"
unwind=$("$bench" unwind "$iterations" | awk '{print $3}')
base=$(head -1 "$out/table" | cut -f2)
echo "host: $(uname -m), $(nproc) cores; $iterations cudaMalloc+cudaFree pairs of 1 MiB from ~60 frames, fake CUDA runtime"
printf '| configuration | ns per alloc+free | added by memguard (ns) |\n|---|---|---|\n'
while IFS=$'\t' read -r label ns; do
    printf '| %s | %.0f | %.0f |\n' "$label" "$ns" "$(awk "BEGIN{print $ns - $base}")"
done < "$out/table"
printf '| unwinder alone (capture of the same ~60-frame stack) | %.0f | |\n' "$unwind"
