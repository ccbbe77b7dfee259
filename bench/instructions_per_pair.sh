#!/usr/bin/env bash
# Instructions per recorded allocation+free pair, under callgrind (deterministic, unlike timings on a
# shared machine): the difference between runs of 40,000 and 20,000 pairs (each run also makes a
# tenth as many warm-up pairs: 22,000 pairs apart), divided by 22,000, so start-up and exit cancel
# out. The writer thread's formatting of packed records is counted too.
#   bench/instructions_per_pair.sh LIBMEMGUARD hook|alloc|python [ENV=VALUE...]
#     hook:   cudaMalloc+cudaFree through the preloaded hooks (build/bin/memguard_bench_hook_cost)
#     alloc:  memguard_alloc+memguard_free of allocator mode (build/bin/memguard_bench_alloc_tracking,
#             40 frames deep); pass MEMGUARD_ALLOCATOR=memguard
#     python: the same pairs called from 30 Python frames (bench/alloc_tracking_cost.py, through
#             ctypes); pass MEMGUARD_ALLOCATOR=memguard
# BUILD (default build) names the build directory whose bench binaries run: compare two libraries
# with the same binaries. Figures in docs/benchmarks.md before 2026-12-05 were divided by 20,000:
# they are 10% above these.
set -euo pipefail
lib=$1 mode=$2
shift 2
envs=("$@")
build=${BUILD:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
    local n=$1 cmd
    case $mode in
        hook) cmd=("$build/bin/memguard_bench_hook_cost" alloc "$n") ;;
        alloc) cmd=("$build/bin/memguard_bench_alloc_tracking" "$n" 40) ;;
        # The interpreter itself (a pyenv shim is a script, and callgrind would follow only it).
        python) cmd=("$(python3 -c 'import sys; print(sys.executable)')" "$(dirname "$0")/alloc_tracking_cost.py"
                     --lib "$build/lib/libmemguard_bench_tracking.so" --iterations "$n") ;;
        *) echo "instructions_per_pair: mode hook, alloc or python" >&2; exit 2 ;;
    esac
    env "${envs[@]}" MEMGUARD_OUTPUT="$out/r.%p.mgr" LD_PRELOAD="$lib" \
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n" "${cmd[@]}" >/dev/null 2>&1
    awk '/^(summary|totals):/ {print $2; exit}' "$out/cg.$n"
}
a=$(run 20000)
b=$(run 40000)
echo $(((b - a) / 22000))
