#!/usr/bin/env bash
# The report's encodings side by side (issue 23, docs/benchmarks.md): report bytes per
# allocation+free pair, instructions per pair on the hooking thread and over all threads (the
# writer thread's encoding included), under callgrind, for MEMGUARD_REPORT_ENCODING=text and
# binary, in interposition mode (cudaMalloc+cudaFree through the hooks, fake CUDA runtime,
# 64-frame stacks) and allocator mode (memguard_alloc+memguard_free, 40 frames deep, stacks and
# StackMemo on); then the reader's speed on a churn report in each encoding.
#   bench/report_encoding.sh [BUILD_DIR] [READER_PAIRS]
# With BASE_LIB=<another libmemguard.so> (say main's, before binary reports) its rows come first,
# with the same bench binaries: the cost before, in text.
# Per-pair figures are differences between runs of 40,000 and 20,000 pairs, divided by 20,000, so
# that start-up, the header and exit cancel out.
set -euo pipefail
build=${1:-build}
reader_pairs=${2:-1000000}
lib=$(cd "$build/lib" && pwd)/libmemguard.so
cli=$build/bin/memguard
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

bench_cmd() {  # mode n
    if [ "$1" = hook ]; then echo "$build/bin/memguard_bench_hook_cost alloc $2"; else
        echo "$build/bin/memguard_bench_alloc_tracking $2 40"; fi
}
mode_env() {  # mode
    if [ "$1" = alloc ]; then echo MEMGUARD_ALLOCATOR=memguard; else echo MEMGUARD_ENABLE=1; fi
}
report_bytes() {  # mode encoding n [lib]
    rm -f "$out"/r.*
    # shellcheck disable=SC2046
    env $(mode_env "$1") MEMGUARD_REPORT_ENCODING="$2" MEMGUARD_OUTPUT="$out/r.%p.mgr" LD_PRELOAD="${4:-$lib}" \
        $(bench_cmd "$1" "$3") >/dev/null
    stat -c %s "$out"/r.*.mgr
}
callgrind() {  # mode encoding n [lib] -> "hook_thread all_threads"
    rm -f "$out"/cg* "$out"/r.*
    # shellcheck disable=SC2046
    env $(mode_env "$1") MEMGUARD_REPORT_ENCODING="$2" MEMGUARD_OUTPUT="$out/r.%p.mgr" LD_PRELOAD="${4:-$lib}" \
        valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg" \
        $(bench_cmd "$1" "$3") >/dev/null 2>&1
    local main all
    main=$(awk '/^(summary|totals):/ {print $2; exit}' "$out"/cg-01)
    all=$(for f in "$out"/cg-*; do awk '/^(summary|totals):/ {print $2; exit}' "$f"; done | awk '{s += $1} END {print s}')
    echo "$main $all"
}

echo "host: $(uname -m), $(nproc) cores; $(date -u +%Y-%m-%d); library $lib"
printf '| mode | encoding | report bytes per pair | instructions per pair, hooking thread | instructions per pair, all threads |\n'
printf '|---|---|---|---|---|\n'
arms=(text binary)
if [ -n "${BASE_LIB:-}" ]; then
    cp "$BASE_LIB" "$out/base.so"  # a copy: the other build may be rebuilt meanwhile
    arms=(base text binary)
fi
for mode in hook alloc; do
    for arm in "${arms[@]}"; do
        enc=$arm use=$lib
        if [ "$arm" = base ]; then enc=text use=$out/base.so; fi
        a=$(report_bytes $mode $enc 20000 "$use")
        b=$(report_bytes $mode $enc 40000 "$use")
        read -r m1 t1 <<<"$(callgrind $mode $enc 20000 "$use")"
        read -r m2 t2 <<<"$(callgrind $mode $enc 40000 "$use")"
        name=$([ $mode = hook ] && echo "interposition (A/F)" || echo "allocator (T/t)")
        label=$([ "$arm" = base ] && echo "text, BASE_LIB" || echo "$enc")
        printf '| %s | %s | %s | %s | %s |\n' "$name" "$label" \
            "$(awk "BEGIN{printf \"%.1f\", ($b - $a) / 20000}")" $(((m2 - m1) / 20000)) $(((t2 - t1) / 20000))
    done
done

# The reader: one churn report of READER_PAIRS pairs (interposition mode), in binary as recorded
# and in text (memguard export --text); `memguard summary` on each, three times, interleaved.
env MEMGUARD_OUTPUT="$out/churn.mgr" LD_PRELOAD="$lib" "$build/bin/memguard_bench_hook_cost" alloc "$reader_pairs" \
    >/dev/null
"$cli" export --text "$out/churn.mgr" -o "$out/churn.txt.mgr" >/dev/null
records=$(($(wc -l <"$out/churn.txt.mgr") - 1))
echo
echo "reader: $reader_pairs pairs, $records records; binary $(stat -c %s "$out/churn.mgr") B, text $(stat -c %s "$out/churn.txt.mgr") B"
printf '| encoding | run | memguard summary (s) | records/s |\n|---|---|---|---|\n'
for rep in 1 2 3; do
    for enc in text binary; do
        f=$([ $enc = text ] && echo "$out/churn.txt.mgr" || echo "$out/churn.mgr")
        s=$( { /usr/bin/time -f %e "$cli" summary "$f" >/dev/null; } 2>&1 | tail -1)
        printf '| %s | %s | %s | %s |\n' $enc $rep "$s" "$(awk "BEGIN{printf \"%.0f\", $records / $s}")"
    done
done
