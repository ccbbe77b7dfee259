#!/usr/bin/env bash
# Builds the torch-memguard wheel and gives it its honest platform tag; prints the wheel's path.
#
#   tools/build-wheel.sh [-o DIR] [PIP_ARGS...]
#
# 1. `pip wheel . --no-deps` (pyproject.toml: scikit-build-core runs the project's CMake in the
#    persistent build-wheel/, with ccache when present), which tags it py3-none-linux_x86_64;
# 2. `auditwheel show` reads the symbol versions its ELF files need and names the manylinux tag they
#    are consistent with (only glibc, libstdc++ and libgcc_s are NEEDED; nothing is grafted);
# 3. the wheel is retagged to that tag (`wheel tags`) and put in DIR (default dist/), replacing
#    earlier torch_memguard wheels there.
#
# Needs what tools/setup.sh installs (the build's dependencies, .deps/libunwind, auditwheel and
# wheel). PIP_ARGS go to `pip wheel`, e.g. --no-build-isolation (uses the scikit-build-core and
# CMake already installed instead of fetching scikit-build-core into an isolated environment).
# PYTHON selects the interpreter (default python3); the wheel serves CPython 3.10-3.13 either way.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
out=$repo/dist
if [[ ${1:-} == -o ]]; then
    [[ $# -ge 2 ]] || { echo "build-wheel: -o needs a directory" >&2; exit 2; }
    out=$(mkdir -p "$2" && cd "$2" && pwd)
    shift 2
fi

for module in auditwheel wheel; do
    if ! "$python" -c "import $module" 2> /dev/null; then
        echo "build-wheel: $python lacks the $module package:" \
            "run tools/setup.sh (or $python -m pip install $module)" >&2
        exit 1
    fi
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
echo "build-wheel: pip wheel $repo" >&2
(cd "$repo" && "$python" -m pip wheel . --no-deps -w "$stage/built" "$@") >&2

built=("$stage"/built/torch_memguard-*.whl)
if [[ ${#built[@]} -ne 1 || ! -f ${built[0]} ]]; then
    echo "build-wheel: pip wheel made no torch_memguard wheel (or several) in $stage/built" >&2
    exit 1
fi

show=$("$python" -m auditwheel show "${built[0]}" 2>&1) || {
    echo "$show" >&2
    echo "build-wheel: auditwheel show failed on ${built[0]}" >&2
    exit 1
}
echo "$show" >&2
# "... is consistent with the following platform tag: "manylinux_2_34_x86_64"." (wrapped lines)
tag=$(printf '%s' "$show" | tr '\n' ' ' | sed -n 's/.*following platform tag: *"\([^"]*\)".*/\1/p')
if [[ -z $tag ]]; then
    echo "build-wheel: cannot find the platform tag in auditwheel's answer above" >&2
    exit 1
fi

mkdir -p "$stage/tagged"
cp "${built[0]}" "$stage/tagged/"
wheel=("$stage"/tagged/*.whl)
if [[ $tag != linux_* ]]; then
    (cd "$stage/tagged" && "$python" -m wheel tags --remove --platform-tag "$tag" "$(basename "${wheel[0]}")") >&2
    wheel=("$stage"/tagged/*.whl)
fi
case $(basename "${wheel[0]}") in
    *-py3-none-"$tag".whl) ;;
    *) echo "build-wheel: $(basename "${wheel[0]}") does not end in py3-none-$tag.whl" >&2; exit 1 ;;
esac

mkdir -p "$out"
rm -f "$out"/torch_memguard-*.whl
mv "${wheel[0]}" "$out/"
echo "build-wheel: auditwheel: $tag" >&2
echo "$out/$(basename "${wheel[0]}")"
