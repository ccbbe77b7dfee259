#!/usr/bin/env bash
# Build the nongnu libunwind as a position-independent static archive for libmemguard.so.
#
# Why: Debian's libunwind.a is not PIC, so it cannot go into a shared library, and the shared
# libunwind.so.8 is missing on many machines (see docs/unwinding.md). We build it from the
# distribution's own source package; no libunwind code lives in this repository.
#
# usage: tools/build-libunwind.sh PREFIX [SOURCE_TARBALL_OR_DIR]
#   PREFIX gets include/libunwind*.h and lib/libunwind.a.
#   Without a source argument the script fetches Debian's source package with `apt-get source`
#   (it enables deb-src entries for the configured Debian mirrors when none exist; needs root).
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
    if ! apt-get source --download-only -qq libunwind >/dev/null 2>&1; then
        # No deb-src entries yet: derive them from the binary entries.
        if [ -w /etc/apt/sources.list.d ]; then
            for f in /etc/apt/sources.list.d/*.sources; do
                [ -f "$f" ] || continue
                grep -q '^Types: deb$' "$f" || continue
                sed 's/^Types: deb$/Types: deb-src/' "$f" > "/etc/apt/sources.list.d/memguard-src-$(basename "$f")"
            done
            if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
                sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/memguard-src.list
            fi
            apt-get update -qq >/dev/null
        fi
        apt-get source --download-only -qq libunwind >/dev/null 2>&1 || {
            echo "build-libunwind: cannot fetch Debian's libunwind source (apt-get source libunwind)." >&2
            echo "build-libunwind: pass a libunwind release tarball or source directory as the second argument." >&2
            exit 1
        }
    fi
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
