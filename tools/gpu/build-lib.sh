#!/usr/bin/env bash
# Builds build-gpu/lib/libmemguard.so (the library only, RelWithDebInfo) when it is missing, for
# the GPU scripts that need no tests (bench7.sh, profile7.sh, bench/alloc_timing/run.sh).
#   tools/gpu/build-lib.sh LOG     the build's output goes to LOG; on failure its tail is printed
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: tools/gpu/build-lib.sh LOG}
[ -f build-gpu/lib/libmemguard.so ] && exit 0
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF &&
  cmake --build build-gpu -j"$(nproc)" --target memguard; } >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
