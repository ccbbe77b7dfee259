#!/usr/bin/env bash
# Build the nongnu libunwind as a position-independent static archive for libmemguard.so.
#
# Why: Debian's libunwind.a is not PIC, so it cannot go into a shared library, and the shared
# libunwind.so.8 is missing on many machines (see docs/unwinding.md). We build it from the
# distribution's own source package; no libunwind code lives in this repository.
#
# usage: tools/build-libunwind.sh PREFIX [SOURCE_TARBALL_OR_DIR]
#   PREFIX gets include/libunwind*.h and lib/libunwind.a.
#   Without a source argument the script fetches Debian's source package with `apt-get source`,
#   which needs deb-src entries: tools/setup.sh adds them (and then runs this script for
#   .deps/libunwind, where CMake looks). This script changes nothing outside PREFIX and a
#   temporary directory.
set -euo pipefail
prefix=${1:?usage: build-libunwind.sh PREFIX [SOURCE]}
src=${2:-}
if [ -f "$prefix/lib/libunwind.a" ] && [ -f "$prefix/include/libunwind.h" ]; then
    echo "libunwind already built in $prefix"; exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/memguard-libunwind.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
if [ -z "$src" ]; then
    apt-get source --download-only -qq libunwind >/dev/null 2>&1 || {
        echo "build-libunwind: cannot fetch Debian's libunwind source (apt-get source libunwind)." >&2
        echo "build-libunwind: tools/setup.sh adds the deb-src entries it needs; or pass a libunwind release" >&2
        echo "build-libunwind: tarball or source directory as the second argument." >&2
        exit 1
    }
    src=$(ls "$work"/libunwind_*.orig.tar.* | head -n 1)
fi
if [ -d "$src" ]; then
    srcdir=$src
else
    mkdir unpack && tar -xf "$src" -C unpack
    srcdir=$(find unpack -mindepth 1 -maxdepth 1 -type d | head -n 1)
fi
cd "$srcdir"
[ -x configure ] || autoreconf -fi >/dev/null
# Only the local unwinder is needed. No lzma/zlib: libmemguard.so must not gain NEEDED entries.
./configure -q --prefix="$prefix" --enable-static --disable-shared \
    --disable-minidebuginfo --disable-zlibdebuginfo --disable-coredump --disable-ptrace \
    --disable-setjmp --disable-tests --disable-documentation --disable-cxx-exceptions \
    CFLAGS="-O2 -g -fPIC -fvisibility=hidden" >/dev/null
make -j"$(nproc)" >/dev/null
make install >/dev/null
echo "libunwind built in $prefix"
