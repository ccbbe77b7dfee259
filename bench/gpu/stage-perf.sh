#!/usr/bin/env bash
# Stages this machine's `perf` (Debian's linux-perf) with the shared libraries it needs into
# .deps/perf, so that the device tool can carry it to the GPU machine, which has no perf:
#   bench/gpu/stage-perf.sh            then run(..., carry=[".deps/libunwind", ".deps/perf"])
#   .deps/perf/perf record -g -o $OUT/perf.data -- python3 bench/alloc_timing/lat.py mg_nostack
#   .deps/perf/perf report -i $OUT/perf.data --no-children --stdio | head -80
# glibc, libstdc++ and libgcc_s are left out: the GPU machine's own (newer) ones serve. Whether
# perf may sample there depends on its kernel.perf_event_paranoid and the container.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$(command -v perf) || { echo "stage-perf.sh: no perf here (apt-get install linux-perf)" >&2; exit 1; }
dest=.deps/perf
rm -rf "$dest"
mkdir -p "$dest/lib"
cp "$(readlink -f "$src")" "$dest/perf.bin"
ldd "$src" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
        libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
        *) cp -L "$lib" "$dest/lib/" ;;
    esac
done
cat > "$dest/perf" <<'WRAP'
#!/usr/bin/env bash
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/perf.bin" "$@"
WRAP
chmod +x "$dest/perf"
du -sh "$dest"
