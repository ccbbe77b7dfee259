#!/usr/bin/env bash
# Where memguard_alloc/memguard_free spend their time inside PyTorch's process (docs/benchmarks.md,
# "Where the time goes"), on the GPU machine:
#   bash bench/alloc_timing/run.sh [REPS] [REF...]
# For each REF, a git commit or a directory holding a source tree (default HEAD; give two to
# compare a change side by side; the GPU machine's copy of .git may lack this session's commits,
# so there pass trees: `git archive REF | tar -x -C DIR`, untracked DIR travels): builds the library
# and a timing copy of it (timing.patch: rdtsc around the parts of memguard_alloc and
# memguard_free, printed at exit) from that commit in a scratch directory, all builds at once;
# builds bench/pluggable_floor.cpp; then runs lat.py (torch.empty + free of 512 B and 1 MiB,
# 5 x 100000, median) for native, floor, and mg_nostack and the timing build of each REF,
# alternated, REPS times (default 3), each process on cores 4-5. Lines name the REF by its index
# (mg_nostack.0, mg_timing.0, ...). no_records.patch, applied to a tree given as a REF, makes a
# build that writes no T/t records: beside the normal one, the bound of what cheaper records can
# gain. With ALLOC_TIMING_KEEP=DIR the builds go to DIR and stay
# (DIR/lib.I/build/lib/libmemguard.so), e.g. for bench/allocator_mode.py --lib ... --lib-b ....
# ALLOC_TIMING_NO_TIMING=1 leaves out the timing builds and their arms.
# Both patches are against the tree layout of issue 18 (src/allocmode/api.cpp and
# tracking_allocator.cpp); older REFs need the patches of their own time, from git history.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
shift $(( $# > 0 ? 1 : 0 ))
refs=("$@")
[ ${#refs[@]} -gt 0 ] || refs=(HEAD)
scratch=${ALLOC_TIMING_KEEP:-$(mktemp -d /tmp/memguard-timing.XXXXXX)}
mkdir -p "$scratch"
prefix=$PWD/.deps/libunwind
build() {  # source-dir extra-cxx-flags
    cmake -S "$1" -B "$1/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF \
          -DMEMGUARD_LIBUNWIND_PREFIX="$prefix" ${2:+-DCMAKE_CXX_FLAGS=$2} >"$1.log" 2>&1 &&
        cmake --build "$1/build" -j"$(nproc)" --target memguard >>"$1.log" 2>&1 ||
        { echo "build of $1 failed:"; tail -30 "$1.log"; return 1; }
}
pids=()
for i in "${!refs[@]}"; do
    kinds=(lib)
    [ -n "${ALLOC_TIMING_NO_TIMING:-}" ] || kinds+=(timing)
    for kind in "${kinds[@]}"; do
        mkdir -p "$scratch/$kind.$i"
        if [ -d "${refs[$i]}" ]; then
            cp -a "${refs[$i]}/." "$scratch/$kind.$i/"
        else
            git archive "${refs[$i]}" | tar -x -C "$scratch/$kind.$i"
        fi
    done
    echo "ref $i: ${refs[$i]}$([ -d "${refs[$i]}" ] || echo " = $(git rev-parse --short "${refs[$i]}")")"
    build "$scratch/lib.$i" "" & pids+=($!)
    [ -z "${ALLOC_TIMING_NO_TIMING:-}" ] || continue
    (cd "$scratch/timing.$i" && patch -p1 -s < "$OLDPWD/bench/alloc_timing/timing.patch")
    build "$scratch/timing.$i" -DMEMGUARD_PROBE_TIMING & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -O2 -shared -fPIC bench/pluggable_floor.cpp -o "$scratch/floor.so"
lat=bench/alloc_timing/lat.py
nostack=(MEMGUARD_OUTPUT="$scratch/r.%p.mgr" MEMGUARD_ALLOCATOR=memguard MEMGUARD_STACK_DEPTH=0 MEMGUARD_PYTHON_STACKS=0)
for ((r = 0; r < reps; ++r)); do
    python3 "$lat" native
    FLOOR_LIB="$scratch/floor.so" python3 "$lat" floor
    for i in "${!refs[@]}"; do
        env "${nostack[@]}" LD_PRELOAD="$scratch/lib.$i/build/lib/libmemguard.so" python3 "$lat" "mg_nostack.$i"
        [ -n "${ALLOC_TIMING_NO_TIMING:-}" ] ||
            env "${nostack[@]}" LD_PRELOAD="$scratch/timing.$i/build/lib/libmemguard.so" python3 "$lat" "mg_timing.$i"
    done
    rm -f "$scratch"/r.*.mgr
done
[ -n "${ALLOC_TIMING_KEEP:-}" ] || rm -rf "$scratch"
