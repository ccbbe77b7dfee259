#!/usr/bin/env bash
# Profiles torch.empty + free inside PyTorch's process on the GPU machine with perf (allocator mode's
# latency: where memguard's allocator mode spends its time there, next to PyTorch's allocator).
#   here:  bash bench/gpu/stage-perf.sh
#   there: bash bench/gpu/profile-alloc-latency.sh        (device tool: carry .deps/libunwind and .deps/perf)
# Builds build-gpu/ (the library) when missing; prints perf's kernel.perf_event_paranoid, then
# for native and mg_nostack (memguard's allocator, records, no stacks) the top of a flat profile
# of the allocating thread (bench/alloc_timing/lat.py, pinned to cores 4-5), and writes the perf
# data to $OUT (device tool) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
perf=.deps/perf/perf
[ -x "$perf" ] || { echo "profile-alloc-latency.sh: $perf missing: run bench/gpu/stage-perf.sh here and carry .deps/perf" >&2; exit 1; }
echo "kernel.perf_event_paranoid = $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?')"
bench/gpu/build-lib.sh "$out/cmake-profile.log" || exit 1
lib=$PWD/build-gpu/lib/libmemguard.so
reports=$(mktemp -d)
for arm in native mg_nostack; do
    env=()
    if [ "$arm" = mg_nostack ]; then
        env=(LD_PRELOAD="$lib" MEMGUARD_ALLOCATOR=memguard MEMGUARD_STACK_DEPTH=0 MEMGUARD_PYTHON_STACKS=0
             MEMGUARD_OUTPUT="$reports/r.%p.mgr")
    fi
    echo "== $arm"
    if ! env "${env[@]}" "$perf" record -F 4999 -g -o "$out/$arm.data" -- python3 bench/alloc_timing/lat.py "$arm" \
            2>"$out/$arm.record.log"; then
        echo "perf record failed:"; tail -5 "$out/$arm.record.log"; continue
    fi
    "$perf" report -i "$out/$arm.data" --no-children --stdio --sort comm,dso,symbol --percent-limit 0.4 \
        -g none 2>/dev/null | grep -E '^ +[0-9]' | cut -c1-170 | head -60
done
rm -rf "$reports"
