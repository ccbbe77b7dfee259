# The Python hook's CPU test drivers (tests/python) under this machine's CPython and torch.
#
# The CI runs tests/python with the system's Python (3.11 or 3.13) and a CPU build of torch; the
# GPU machine has CPython 3.12 and torch 2.11, where 3.12's frozen start-up objects kept the
# compile window shut and its profile events reported an exception's way out of a frame as a
# return with None (both found on 2026-11-30). These drivers need no fake CUDA runtime (the
# harness hides the GPU: CUDA_VISIBLE_DEVICES=""), so they run here as they are.

PYTHON_HOOK_DRIVERS = ["compile_window", "compile_garbage_old_objects", "compile_garbage_checkpoint",
                       "exception_keeps_mark", "profile_function", "defer_while_compiling", "lazy_backward",
                       "reregister_after_reset", "two_threads", "report_file"]


@check("python-hook", "the Python hook's test drivers pass under this machine's CPython and torch (tests/python, no fake runtime)")
def python_hook_drivers(ctx):
    tests = HERE.parent.parent / "tests" / "python"
    failed = []
    for name in PYTHON_HOOK_DRIVERS:
        p = ctx.run([ctx.python, str(tests / f"test_{name}.py")], env={"MGTEST_LIB": str(ctx.lib)}, timeout=900,
                    check=False)
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{name:30s} rc={p.returncode} {last} ({p.seconds:.0f} s)")
        if p.returncode != 0:
            failed.append(name)
            print(p.stderr[-3000:])
    print("CPython", sys.version.split()[0])
    assert not failed, f"failed: {failed}"
