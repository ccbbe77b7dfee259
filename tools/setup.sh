#!/usr/bin/env bash
# Installs what building and testing memguard needs on Debian 12 or 13 (run as root or with sudo),
# and builds the PIC static libunwind into .deps/libunwind, where CMake looks for it (configuring
# only finds dependencies; it never installs or builds one). Idempotent: packages already present
# are left alone, and a libunwind already built is kept.
#
#   compilers and CMake; spdlog, fmt, nlohmann/json (the CLI reads rank summaries with it),
#   GoogleTest (Debian packages); dpkg-dev and deb-src entries so
#   that tools/build-libunwind.sh can fetch Debian's libunwind source; CUDA headers
#   from /usr/local/cuda when present, else the nvidia-cuda-runtime wheel from PyPI (NVTX headers:
#   the nvidia-nvtx wheel); PyTorch's CPU
#   build for the Python tests; clang with its compiler-rt (libFuzzer) for the fuzz job of .ci/run;
#   auditwheel and wheel for tools/build-wheel.sh, python3-venv for the wheel's tests (tests/wheel);
#   DuckDB's Python module, which queries `memguard export --jsonl` in a test (launch.jsonl_*).
set -euo pipefail
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
export DEBIAN_FRONTEND=noninteractive

# librsvg2-bin: rsvg-convert renders the picture of `memguard plot` in the tests (report.exports).
# clang, libclang-rt-dev: the libFuzzer harnesses (tests/fuzz; compiler-rt is only a recommendation
# of clang). gcc's sanitizer runtimes (libasan, libtsan, libubsan) come with build-essential.
# python3-venv: `python3 -m venv` (ensurepip) for the wheel's tests.
packages="build-essential cmake pkg-config zlib1g-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev dpkg-dev binutils python3 python3-pip python3-venv librsvg2-bin clang libclang-rt-dev"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# deb-src entries, so that tools/build-libunwind.sh can run `apt-get source libunwind`.
if ! apt-get source --print-uris -qq libunwind >/dev/null 2>&1; then
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        grep -q '^Types: deb$' "$f" || continue
        sed 's/^Types: deb$/Types: deb-src/' "$f" | $sudo tee "/etc/apt/sources.list.d/memguard-src-$(basename "$f")" >/dev/null
    done
    if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $sudo tee /etc/apt/sources.list.d/memguard-src.list >/dev/null
    fi
    $sudo apt-get update -qq
fi

# CUDA headers (build time only; nothing links against CUDA).
if [ ! -f /usr/local/cuda/include/cuda_runtime_api.h ] &&
   ! python3 -c "import glob,os,sys; sys.exit(0 if any(glob.glob(os.path.join(p,'nvidia','*','include','cuda_runtime_api.h')) for p in sys.path) else 1)"; then
    echo "setup: installing CUDA headers from the nvidia-cuda-runtime wheel"
    python3 -m pip install -q 'nvidia-cuda-runtime>=13,<14' 2>/dev/null ||
        python3 -m pip install -q --break-system-packages 'nvidia-cuda-runtime>=13,<14'
fi
# NVTX v3 headers (build time only): the CUDA toolkit has include/nvtx3, the nvidia-cuda-runtime
# wheel does not; the nvidia-nvtx wheel does.
if [ ! -f /usr/local/cuda/include/nvtx3/nvToolsExt.h ] &&
   ! python3 -c "import glob,os,sys; sys.exit(0 if any(glob.glob(os.path.join(p,'nvidia','*','include','nvtx3','nvToolsExt.h')) for p in sys.path) else 1)"; then
    echo "setup: installing NVTX headers from the nvidia-nvtx wheel"
    python3 -m pip install -q 'nvidia-nvtx>=13,<14' 2>/dev/null ||
        python3 -m pip install -q --break-system-packages 'nvidia-nvtx>=13,<14'
fi
# PyTorch (CPU build) for the Python tests of the compile-garbage hook.
if ! python3 -c "import torch" 2>/dev/null; then
    echo "setup: installing torch==2.13.0 (CPU)"
    python3 -m pip install -q torch==2.13.0 2>/dev/null ||
        python3 -m pip install -q --break-system-packages torch==2.13.0
fi
# tools/build-wheel.sh: auditwheel names the wheel's manylinux tag, `wheel tags` retags it. (The wheel's
# build backend, scikit-build-core, is fetched by pip's isolated build.)
if ! python3 -c "import auditwheel, wheel" 2>/dev/null; then
    echo "setup: installing auditwheel and wheel"
    python3 -m pip install -q auditwheel wheel 2>/dev/null ||
        python3 -m pip install -q --break-system-packages auditwheel wheel
fi
# DuckDB: the fleet export's test (tests/launch: launch.jsonl_export_queried_by_duckdb) runs the
# documented query over `memguard export --jsonl` files with it (docs/fleet-export.md).
if ! python3 -c "import duckdb" 2>/dev/null; then
    echo "setup: installing duckdb"
    python3 -m pip install -q duckdb 2>/dev/null ||
        python3 -m pip install -q --break-system-packages duckdb
fi
# libunwind, built PIC from Debian's source (docs/unwinding.md says why): the build's one
# dependency that is not a package. -DMEMGUARD_LIBUNWIND_PREFIX=DIR points CMake elsewhere.
repo=$(cd "$(dirname "$0")/.." && pwd)
"$repo/tools/build-libunwind.sh" "$repo/.deps/libunwind"
echo "setup: done"
