#!/usr/bin/env bash
# Runs one libFuzzer harness for a bounded time on its checked-in corpus (read, never written: new
# inputs go to a temporary directory) with the report dictionary. Exit status: the fuzzer's, so a
# crash, a sanitizer report, a timeout of one input (-timeout) or too much memory fails.
#
#   run_fuzzer.sh FUZZER CORPUS_DIR SECONDS FINDINGS_DIR [libFuzzer options...]
#
# A finding is written to FINDINGS_DIR/<kind>-<sha1> (crash-, timeout-, oom-, leak-); replay it
# with `FUZZER FILE`. The last lines printed give executions, exec/s and coverage (cov:, ft:).
# MEMGUARD_FUZZ_NEW=DIR keeps the new inputs in DIR (to merge into the corpus: docs/security.md ("Kept in CI")).
set -euo pipefail
fuzzer=${1:?usage: run_fuzzer.sh FUZZER CORPUS_DIR SECONDS FINDINGS_DIR [options...]}
corpus=${2:?corpus directory}
seconds=${3:?seconds}
findings=${4:?findings directory}
shift 4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$findings"
if [ -n "${MEMGUARD_FUZZ_NEW:-}" ]; then
    work=$MEMGUARD_FUZZ_NEW
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/memguard-fuzz.XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi
# -timeout: no input may take 10 s (a hang is a finding); -rss_limit_mb: 2 GiB for inputs of a few
# KiB is far more than any report's live set needs (ASan's own overhead included).
# The progress lines of each new input are left out; everything else (a finding's report, the
# final figures) is printed.
set +e
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$here/dict/report.dict" -artifact_prefix="$findings/" "$@" "$work" "$corpus" 2>&1 |
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE)[[:space:]]|^[[:space:]]+NEW_FUNC|# Uses: '
status=${PIPESTATUS[0]}
set -e
# A finding made on a machine that keeps nothing (CI) is lost with it: its input (a few KiB at most)
# goes to the log too, to replay with `base64 -d > FILE && FUZZER FILE`.
if [ "$status" -ne 0 ]; then
    for f in "$findings"/*; do
        if [ -f "$f" ] && [ "$f" -nt "$work" ]; then
            echo "run_fuzzer: $(basename "$f"), base64: $(base64 -w0 "$f")"
        fi
    done
fi
exit "$status"
