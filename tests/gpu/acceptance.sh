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
# (built here by tools/setup.sh) with the working tree; where it has no zlib.h either, carry
# .deps/zlib too (see the build step). Results go to $OUT (device tool) or ./gpu-out.
#
#        tests/gpu/acceptance.sh --wheel dist/torch_memguard-*.whl [--part ...]
# runs the suite through an installed wheel instead (built elsewhere by tools/build-wheel.sh, carried
# with the tree): nothing is built here; the wheel goes into a fresh venv with `pip install
# --no-index` (the machine's torch stays visible through a .pth file), every preloaded run goes
# through that venv's `memguard run --`, and the CLI, the library and the Python are the venv's.
set -euo pipefail
set -o pipefail
cd "$(dirname "$0")/../.."
for arg in "$@"; do
    if [ "$arg" = --list ]; then exec python3 tests/gpu/acceptance.py --list; fi
done
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
wheel=
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --wheel) wheel=${2:?--wheel needs a wheel file}; shift 2 ;;
    --wheel=*) wheel=${1#--wheel=}; shift ;;
    *) args+=("$1"); shift ;;
    esac
done
build=build-gpu
where=(--build "$build")
if [ -n "$wheel" ]; then
    [ -f "$wheel" ] || { echo "acceptance: no wheel file $wheel" >&2; exit 2; }
    venv=$(mktemp -d /tmp/memguard-venv.XXXXXX)
    {
        echo "== machine"; nvidia-smi -L || true; uname -r; python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
        echo "== install $(basename "$wheel") into a fresh venv (no build, no index)"
        python3 -m venv "$venv" || exit 1
        # The machine's torch lives in the python3's own venv: a venv made from a venv does not see it
        # through --system-site-packages, so a .pth file names that site directory.
        site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
        vsite=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "$site" > "$vsite/machine-torch.pth"
        "$venv/bin/python" -m pip install --no-index "$wheel" || exit 1
        for tool in gcc g++ cc c++ cmake; do printf '%s: %s\n' "$tool" "$(command -v $tool || echo none)"; done
        "$venv/bin/python" -c 'import memguard, torch; print("memguard", memguard.__version__, memguard.lib_path(), "active", memguard.active(), "torch", torch.__version__)' || exit 1
    } 2>&1 | tee "$out/install.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
    where=(--venv "$venv")
else
    {
        echo "== machine"; nvidia-smi -L || true; uname -r; python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
        echo "== build"
        # zlib (the CLI's folds): the machine's where it has the headers, else a carried .deps/zlib
        # (include/zlib.h, include/zconf.h and a PIC lib/libz.a, e.g. copied from zlib1g-dev).
        zlib=()
        if ! printf '#include <zlib.h>\n' | c++ -E -x c++ - >/dev/null 2>&1 && [ -f .deps/zlib/include/zlib.h ]; then
            echo "no zlib.h on this machine: the carried .deps/zlib"; zlib=(-DZLIB_ROOT="$PWD/.deps/zlib")
        fi
        cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF "${zlib[@]}" >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
        cmake --build "$build" -j"$(nproc)" --target memguard >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
        cmake --build "$build" -j"$(nproc)" >>"$out/cmake.log" 2>&1 || { echo "warning: full build failed (see cmake.log)"; tail -30 "$out/cmake.log"; }
        ls -la "$build/lib/libmemguard.so" "$build/bin/memguard" || true
    } 2>&1
fi
runs=$(mktemp -d /tmp/memguard-gpu.XXXXXX)
rc=0
PYTHONUNBUFFERED=1 python3 tests/gpu/acceptance.py "${where[@]}" --out "$runs" "${args[@]}" 2>&1 | tee "$out/acceptance.log" || rc=$?
# The device tool brings back only a few files: pack the reports and results into one.
tar -czf "$out/runs.tar.gz" -C "$runs" . 2>/dev/null || true
exit $rc
