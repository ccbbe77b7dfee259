#!/usr/bin/env bash
# Where memguard_alloc/memguard_free spend their time inside PyTorch's process (docs/benchmarks.md,
# "Where the time goes"), on the GPU machine:
#   bash bench/alloc_timing/run.sh [REPS]
# Builds a timing copy of libmemguard.so (timing.patch: rdtsc around the parts of
# memguard_alloc and memguard_free, printed at exit) from the committed tree in a scratch
# directory, the normal library into build-gpu/ when missing, and bench/pluggable_floor.cpp; then
# runs lat.py (torch.empty + free of 512 B and 1 MiB, 5 x 100000, median) for native, floor,
# mg_nostack and the timing build, REPS times (default 3), each process on cores 4-5.
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
scratch=$(mktemp -d /tmp/memguard-timing.XXXXXX)
git archive HEAD | tar -x -C "$scratch"
(cd "$scratch" && patch -p1 -s < bench/alloc_timing/timing.patch)
prefix=$PWD/.deps/libunwind
cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF \
      -DMEMGUARD_LIBUNWIND_PREFIX="$prefix" -DCMAKE_CXX_FLAGS=-DMEMGUARD_PROBE_TIMING >/dev/null
cmake --build "$scratch/build" -j"$(nproc)" --target memguard >/dev/null
tools/gpu/build-lib.sh "$scratch/cmake-lib.log"
g++ -O2 -shared -fPIC bench/pluggable_floor.cpp -o "$scratch/floor.so"
lat=bench/alloc_timing/lat.py
nostack=(MEMGUARD_OUTPUT="$scratch/r.%p.mgr" MEMGUARD_ALLOCATOR=memguard MEMGUARD_STACK_DEPTH=0 MEMGUARD_PYTHON_STACKS=0)
for ((r = 0; r < reps; ++r)); do
    python3 "$lat" native
    FLOOR_LIB="$scratch/floor.so" python3 "$lat" floor
    env "${nostack[@]}" LD_PRELOAD="$PWD/build-gpu/lib/libmemguard.so" python3 "$lat" mg_nostack
    env "${nostack[@]}" LD_PRELOAD="$scratch/build/lib/libmemguard.so" python3 "$lat" mg_timing
    rm -f "$scratch"/r.*.mgr
done
rm -rf "$scratch"
