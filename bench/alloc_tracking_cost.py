"""Allocator mode's per-allocation tracking cost with a Python caller (docs/benchmarks.md).

Calls memguard_bench_tracking (bench/alloc_tracking_cost.cpp) through ctypes from `--py-depth`
nested Python frames, so that memguard's Python frame walker runs on every allocation, like
PyTorch's operators called from a model. ctypes drops the GIL for the call, as PyTorch's
operators do before they allocate. Run under LD_PRELOAD=libmemguard.so (bench/run_alloc_tracking_cost.sh).
Prints "python <native depth> <ns per alloc+free>".
"""
import argparse
import ctypes
import sys


def nested(lib, depth, iterations, native_depth, innermost):
    if depth > 0:
        return nested(lib, depth - 1, iterations, native_depth, innermost) + 0.0
    return innermost(lib, iterations, native_depth)


def direct(lib, iterations, native_depth):
    return lib.memguard_bench_tracking(iterations, native_depth)


def long_function(lines):
    """A function of `lines` statements that allocates at its end, like the `call` function
    inductor generates for a compiled graph (its allocations sit hundreds of lines down)."""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines))
    src = f"def call(lib, iterations, native_depth):\n{body}    return lib.memguard_bench_tracking(iterations, native_depth)\n"
    scope = {}
    exec(compile(src, "<generated call>", "exec"), scope)
    return scope["call"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path of libmemguard_bench_tracking.so")
    ap.add_argument("--iterations", type=int, default=200000)
    ap.add_argument("--depth", type=int, default=40, help="extra native frames")
    ap.add_argument("--py-depth", type=int, default=30, help="extra Python frames")
    ap.add_argument("--long-function", type=int, default=0, metavar="LINES",
                    help="allocate from a generated function this many lines long (0: a short one)")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.memguard_bench_tracking.restype = ctypes.c_double
    lib.memguard_bench_tracking.argtypes = [ctypes.c_long, ctypes.c_int]
    innermost = long_function(args.long_function) if args.long_function > 0 else direct
    ns = nested(lib, args.py_depth, args.iterations, args.depth, innermost)
    if ns < 0:
        sys.exit(1)
    print(f"python {args.depth} {ns:.1f}")


if __name__ == "__main__":
    main()
