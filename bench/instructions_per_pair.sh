#!/usr/bin/env bash
# Instructions per recorded allocation+free pair, under callgrind (deterministic, unlike timings on a
# shared machine): the difference between runs of 40,000 and 20,000 pairs, divided by 20,000, so
# start-up and exit cancel out. The writer thread's formatting of packed records is counted too.
#   bench/instructions_per_pair.sh LIBMEMGUARD hook|alloc [ENV=VALUE...]
#     hook:  cudaMalloc+cudaFree through the preloaded hooks (build/bin/memguard_bench_hook_cost)
#     alloc: memguard_alloc+memguard_free of allocator mode (build/bin/memguard_bench_alloc_tracking,
#            40 frames deep); pass MEMGUARD_ALLOCATOR=memguard
# BUILD (default build) names the build directory whose bench binaries run: compare two libraries
# with the same binaries.
set -euo pipefail
lib=$1 mode=$2
shift 2
envs=("$@")
build=${BUILD:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {
    local n=$1 cmd
    if [ "$mode" = hook ]; then cmd=("$build/bin/memguard_bench_hook_cost" alloc "$n"); else
        cmd=("$build/bin/memguard_bench_alloc_tracking" "$n" 40); fi
    env "${envs[@]}" MEMGUARD_OUTPUT="$out/r.%p.mgr" LD_PRELOAD="$lib" \
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n" "${cmd[@]}" >/dev/null 2>&1
    awk '/^(summary|totals):/ {print $2; exit}' "$out/cg.$n"
}
a=$(run 20000)
b=$(run 40000)
echo $(((b - a) / 20000))
