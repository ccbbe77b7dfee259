#!/usr/bin/env bash
# Builds build-gpu/lib/libmemguard.so (the library only, RelWithDebInfo; incremental: a warm machine keeps
# build-gpu/ between calls, and its library must follow the tree), for
# the GPU scripts that need no tests (allocator-mode.sh, profile-alloc-latency.sh).
#   bench/gpu/build-lib.sh LOG     the build's output goes to LOG; on failure its tail is printed
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: bench/gpu/build-lib.sh LOG}
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF &&
  cmake --build build-gpu -j"$(nproc)" --target memguard; } >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
