#!/usr/bin/env python3
"""Consistency of memguard's hooks (run by CTest as hooks.consistency).

For every hooked CUDA name:
  - a wrapper: the driver variants listed in src/interpose/driver_table.h each have an
    MG_DRIVER_HOOK definition (directly or through a macro) in driver_hooks.cpp, and no hook is
    defined for a name that is not listed; the runtime hooks are MG_EXPORT definitions or macro
    instantiations in runtime_hooks.cpp, graph_hooks.cpp and lookup_hooks.cpp;
  - a forwarder: libmemguard.so exports the name (unversioned), so programs that link libcuda or
    libcudart reach it, and the fake driver (tests/fake_cuda) defines every driver variant so that
    tests can reach the real side;
  - a test: the name appears in a test program or preload test (tests/apps, tests/preload).

Usage: check-hooks.py --source DIR --lib libmemguard.so --fake-driver libcuda.so.1
Prints one line per problem and exits 1 when there is any.
"""
import argparse
import os
import re
import subprocess
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def driver_variants(src):
    text = read(os.path.join(src, "src/interpose/driver_table.h"))
    return re.findall(r"^\s*X\((cu\w+),\s*(cu\w+),\s*(\d+),\s*([01])\)", text, re.M)


def hook_names(text, prefix):
    """Names defined by MG_* hook macros at the start of a line (not in #define bodies)."""
    names = set()
    # clang-format may break a long hook's arguments right after the opening parenthesis.
    text = re.sub(r"^(MG_[A-Z0-9_]+\()\s*\n\s*", r"\1", text, flags=re.M)
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = re.match(r"^MG_[A-Z0-9_]+\((%s\w*)" % prefix, line)
        if m:
            names.add(m.group(1))
        m = re.match(r"^MG_EXPORT\s+\w+\s+(?:CUDAAPI\s+)?(%s\w*)\(" % prefix, line)
        if m:
            names.add(m.group(1))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names[parts[2].split("@")[0]] = parts[2]
    return names


def test_text(src):
    chunks = []
    for sub in ("tests/apps", "tests/preload"):
        d = os.path.join(src, sub)
        for name in sorted(os.listdir(d)):
            if name.endswith((".cpp", ".h", ".inc")):
                chunks.append(read(os.path.join(d, name)))
    return "\n".join(chunks)


def mentioned(name, text):
    # A whole identifier, or a string the test composes from the base name and a suffix.
    if re.search(r"\b%s\b" % re.escape(name), text):
        return True
    for suffix in ("_ptsz", "_v2"):
        if name.endswith(suffix) and re.search(r"\b%s\b" % re.escape(name[: -len(suffix)]), text) and \
                ('"%s"' % suffix in text or "+= \"%s\"" % suffix in text):
            return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fake-driver", required=True)
    args = ap.parse_args()
    src = args.source
    problems = []

    variants = driver_variants(src)
    if len(variants) < 30:
        problems.append("driver_table.h: only %d variants parsed (the table format changed?)" % len(variants))
    listed = {v[0] for v in variants}
    driver_hooks = hook_names(read(os.path.join(src, "src/interpose/driver_hooks.cpp")), "cu")
    for name in sorted(listed - driver_hooks):
        problems.append("%s: listed in driver_table.h but no MG_DRIVER_HOOK wrapper in driver_hooks.cpp" % name)
    for name in sorted(driver_hooks - listed):
        problems.append("%s: wrapped in driver_hooks.cpp but not listed in driver_table.h" % name)

    runtime = set()
    for f in ("runtime_hooks.cpp", "graph_hooks.cpp", "lookup_hooks.cpp"):
        runtime |= hook_names(read(os.path.join(src, "src/interpose", f)), "cuda")
    if len(runtime) < 30:
        problems.append("only %d runtime hooks found (the hook files' format changed?)" % len(runtime))

    ours = exported(args.lib)
    fake = exported(args.fake_driver)
    for name in sorted(listed | runtime):
        sym = ours.get(name)
        if sym is None:
            problems.append("%s: not exported by %s" % (name, args.lib))
        elif "@" in sym:
            problems.append("%s: exported with a version (%s); hooks must be unversioned" % (name, sym))
    if "dlsym" not in ours:
        problems.append("dlsym: not exported by %s (lookups through dlsym are not covered)" % args.lib)
    for name in sorted(listed):
        if name not in fake:
            problems.append("%s: the fake driver does not define it, so no test can reach it" % name)

    tests = test_text(src)
    for name in sorted(listed | runtime):
        if not mentioned(name, tests):
            problems.append("%s: no test program or preload test mentions it" % name)

    for p in problems:
        print("check-hooks: " + p)
    print("check-hooks: %d driver variants, %d runtime hooks, %d problems" % (len(listed), len(runtime), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
