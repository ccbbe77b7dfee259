#!/usr/bin/env bash
# Builds memguard on the GPU machine and runs the GPU acceptance suite (tests/gpu/acceptance.py).
#
# usage: tests/gpu/acceptance.sh --list
#        tests/gpu/acceptance.sh [--part PART[,PART...]] [--only SUBSTRING] [--skip SUBSTRING]...
# The checks are grouped in parts, by feature (interposition, graphs, compile-garbage, python-hook,
# allocator-mode, ...). The whole suite takes more than one 10-minute device call; `--list` prints
# the parts, their checks, and a split into calls that each fit one, e.g.
#   tests/gpu/acceptance.sh --part interposition,graphs,compile-garbage
#   tests/gpu/acceptance.sh --part python-hook,driver-entry-points,phases,export-merge
#   tests/gpu/acceptance.sh --part allocator-mode,allocator-mode-reports,compile-window
# (--list builds nothing.) The H200 machine has no libunwind and no network: carry .deps/libunwind
# (built here by tools/setup.sh) with the working tree. Results go to $OUT (device tool) or ./gpu-out.
set -euo pipefail
set -o pipefail
cd "$(dirname "$0")/../.."
for arg in "$@"; do
    if [ "$arg" = --list ]; then exec python3 tests/gpu/acceptance.py --list; fi
done
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
PYTHONUNBUFFERED=1 python3 tests/gpu/acceptance.py --build "$build" --out "$runs" "$@" 2>&1 | tee "$out/acceptance.log" || rc=$?
# The device tool brings back only a few files: pack the reports and results into one.
tar -czf "$out/runs.tar.gz" -C "$runs" . 2>/dev/null || true
exit $rc
