#!/usr/bin/env bash
# Runs examples/alloc_demo under memguard (`memguard run`) and shows what memguard recorded.
#
#   tools/run-example.sh
#
# Builds the project if needed (cmake -S . -B build && cmake --build build -j"$(nproc)"). On a machine with
# a GPU (nvidia-smi -L lists one) and a real libcudart.so.13, the example runs against the real
# runtime; otherwise against the fake runtime of the tests. Then prints `memguard summary` and
# `memguard top` of the report it wrote.
#
# Environment: MEMGUARD_BUILD_DIR (default: build in the repository), CUDART_DIR (a directory
# holding the real libcudart.so.13, to skip the search).
set -euo pipefail

repo_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${MEMGUARD_BUILD_DIR:-$repo_dir/build}
cudart_soname=libcudart.so.13

build() {
    if [[ ! -f $build_dir/CMakeCache.txt ]]; then
        cmake -S "$repo_dir" -B "$build_dir"
    fi
    cmake --build "$build_dir" -j"$(nproc)"
}

# Prints the directory of a real libcudart.so.13, or nothing.
find_real_cudart() {
    local candidates=()
    if [[ -n ${CUDART_DIR:-} ]]; then
        candidates+=("$CUDART_DIR/$cudart_soname")
    fi
    if command -v ldconfig > /dev/null 2>&1 || [[ -x /sbin/ldconfig ]]; then
        local path
        while read -r path; do
            candidates+=("$path")
        done < <({ ldconfig -p 2> /dev/null || /sbin/ldconfig -p 2> /dev/null || true; } |
            awk -v name="$cudart_soname" '$1 == name && /x86-64/ { print $NF }')
    fi
    if command -v python3 > /dev/null 2>&1; then
        # The nvidia-cuda-runtime wheel (PyTorch's dependency): nvidia/cuda_runtime/lib or, for
        # CUDA 13, nvidia/cu13/lib.
        local path
        while read -r path; do
            candidates+=("$path")
        done < <(python3 - "$cudart_soname" 2> /dev/null << 'EOF' || true
import glob, os, sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
for root in list(nvidia.__path__):
    for path in sorted(glob.glob(os.path.join(root, "*", "lib", sys.argv[1]))):
        print(path)
EOF
        )
    fi
    local cuda_home=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
    candidates+=("$cuda_home/lib64/$cudart_soname" "$cuda_home/lib/$cudart_soname"
        "$cuda_home/targets/x86_64-linux/lib/$cudart_soname")

    local candidate fake
    fake=$(realpath -m "$build_dir/tests/fake_cuda/$cudart_soname")
    for candidate in "${candidates[@]}"; do
        if [[ -f $candidate && $(realpath -m "$candidate") != "$fake" ]]; then
            dirname "$(realpath "$candidate")"
            return 0
        fi
    done
}

has_gpu() {
    command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q '^GPU '
}

main() {
    build
    local example=$build_dir/examples/alloc_demo
    local memguard_lib=$build_dir/lib/libmemguard.so
    local memguard_cli=$build_dir/bin/memguard
    local path
    for path in "$example" "$memguard_lib" "$memguard_cli"; do
        if [[ ! -e $path ]]; then
            echo "run-example: $path is missing after the build" >&2
            exit 1
        fi
    done

    local library_path=${LD_LIBRARY_PATH:-}
    local real_dir=""
    if has_gpu; then
        real_dir=$(find_real_cudart)
        if [[ -z $real_dir ]]; then
            echo "run-example: a GPU is present but no real $cudart_soname was found" \
                "(set CUDART_DIR); using the fake CUDA runtime" >&2
        fi
    fi
    if [[ -n $real_dir ]]; then
        echo "run-example: running against the real CUDA runtime in $real_dir"
        library_path=$real_dir${library_path:+:$library_path}
    else
        echo "run-example: running against the fake CUDA runtime because no GPU was found"
    fi

    local out_dir
    mkdir -p "$build_dir/examples"
    out_dir=$(mktemp -d "$build_dir/examples/run.XXXXXX")
    echo "\$ memguard run --output $out_dir/alloc_demo.%p.mgr -- $example"
    LD_LIBRARY_PATH=$library_path "$memguard_cli" run --library "$memguard_lib" \
        --output "$out_dir/alloc_demo.%p.mgr" -- "$example"

    local reports=("$out_dir"/alloc_demo.*.mgr)
    if [[ ! -f ${reports[0]} ]]; then
        echo "run-example: the example wrote no report in $out_dir" >&2
        exit 1
    fi
    local report=${reports[0]}
    echo
    echo "\$ memguard summary $report"
    "$memguard_cli" summary "$report"
    echo
    echo "\$ memguard top $report"
    "$memguard_cli" top "$report"
}

main "$@"
