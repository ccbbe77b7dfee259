#!/usr/bin/env bash
# Builds memguard on the GPU machine and runs the GPU acceptance suite (tools/gpu/acceptance.py).
#
# usage: tools/gpu/acceptance.sh [--only ISSUE[,ISSUE...]|SUBSTRING] [--skip SUBSTRING]... (--skip repeatable).
# The whole suite takes more than one 10-minute device call (about 15 minutes of checks): e.g.
#   tools/gpu/acceptance.sh --only 2,3,4 --skip "test drivers"                      (~6 min)
#   tools/gpu/acceptance.sh --only 5,6,7; tools/gpu/acceptance.sh --only "test drivers"   (~7 min)
# (on 2026-12-01 `--only 2,3,4` alone ran past 585 s: the Python hook's drivers took 250 s).
# The H200 machine has no libunwind and no network: carry .deps/libunwind (built here by
# tools/build-libunwind.sh) with the working tree. Results go to $OUT (device tool) or ./gpu-out.
set -euo pipefail
set -o pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
build=build-gpu
{
    echo "== machine"; nvidia-smi -L || true; uname -r; python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
    echo "== build"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
    cmake --build "$build" -j"$(nproc)" --target memguard >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
    cmake --build "$build" -j"$(nproc)" >>"$out/cmake.log" 2>&1 || { echo "warning: full build failed (see cmake.log)"; tail -30 "$out/cmake.log"; }
    ls -la "$build/lib/libmemguard.so" "$build/bin/memguard" || true
} 2>&1
runs=$(mktemp -d /tmp/memguard-gpu.XXXXXX)
rc=0
PYTHONUNBUFFERED=1 python3 tools/gpu/acceptance.py --build "$build" --out "$runs" "$@" 2>&1 | tee "$out/acceptance.log" || rc=$?
# The device tool brings back only a few files: pack the reports and results into one.
tar -czf "$out/runs.tar.gz" -C "$runs" . 2>/dev/null || true
exit $rc
