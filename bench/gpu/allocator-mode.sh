#!/usr/bin/env bash
# Allocator mode against PyTorch's allocator on the GPU machine (bench/allocator_mode.py: torch.empty
# latency, step time, peak reserved), in parts that each fit one device call (10 minutes):
#   bench/gpu/allocator-mode.sh latency    `together` eight times, one round per pair of cores each (~4 min);
#                                          LIB_B=path adds a second build as mgb_nostack (an A/B in one run);
#                                          REF_TREE=dir builds that source tree (`git archive REF | tar -x -C
#                                          dir`, carried: the GPU machine's .git may lack new commits) and
#                                          uses its library as LIB_B
#   bench/gpu/allocator-mode.sh eager      eager_small and eager, 3 processes per arm, pinned (~7 min)
#   bench/gpu/allocator-mode.sh compiled   compiled, 3 processes per arm, pinned (~5 min)
#   bench/gpu/allocator-mode.sh small      small_together three times: the CPU-bound step, arms at once (~5 min);
#                                          LIB_B / REF_TREE add that build with full tracking as the arm mgb
# Builds build-gpu/ (the library only, incrementally: build-lib.sh). Tables on stdout; JSON in $OUT (device
# tool) or ./gpu-out, to merge later with `python3 bench/allocator_mode.py --tables A.json B.json`.
set -euo pipefail
cd "$(dirname "$0")/../.."
part=${1:?usage: bench/gpu/allocator-mode.sh latency|eager|compiled|small}
case $part in latency|eager|compiled|small) ;; *) echo "allocator-mode.sh: unknown part '$part' (latency, eager, compiled or small)" >&2; exit 2 ;; esac
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
lib=build-gpu/lib/libmemguard.so
bench/gpu/build-lib.sh "$out/cmake-bench.log" || exit 1
if [ -n "${REF_TREE:-}" ]; then
    [ -f "$REF_TREE/CMakeLists.txt" ] || { echo "allocator-mode.sh: REF_TREE=$REF_TREE holds no source tree" >&2; exit 2; }
    { cmake -S "$REF_TREE" -B "$REF_TREE/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMGUARD_BUILD_TESTS=OFF \
          -DMEMGUARD_LIBUNWIND_PREFIX="$PWD/.deps/libunwind" &&
      cmake --build "$REF_TREE/build" -j"$(nproc)" --target memguard; } >"$out/cmake-ref.log" 2>&1 ||
        { tail -30 "$out/cmake-ref.log"; exit 1; }
    LIB_B=$(cd "$REF_TREE/build/lib" && pwd)/libmemguard.so
    echo "mgb_nostack: the library of $REF_TREE"
fi
pin=4,5,6,7,8,9,10,11
case $part in
    # Many short runs: processes of one build differ by several percent for their whole life.
    latency) python3 bench/allocator_mode.py --lib "$lib" ${LIB_B:+--lib-b "$LIB_B"} --bench together --reps 8 --rounds 1 \
                 --json "$out/together.json" ;;
    eager) python3 bench/allocator_mode.py --lib "$lib" --bench eager_small,eager --reps 3 --cpus $pin --json "$out/eager.json" ;;
    compiled) python3 bench/allocator_mode.py --lib "$lib" --bench compiled --reps 3 --cpus $pin --json "$out/compiled.json" ;;
    small) python3 bench/allocator_mode.py --lib "$lib" ${LIB_B:+--lib-b "$LIB_B"} --bench small_together --reps 3 --cpus $pin \
               --json "$out/small.json" ;;
esac
