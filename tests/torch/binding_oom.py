"""memguard's allocator-mode OOM crosses PyTorch's Python binding as torch.cuda.OutOfMemoryError.

A child interpreter runs under LD_PRELOAD=libmemguard.so with the fake runtime (100 MiB) loaded
RTLD_LOCAL and torch imported (libc10 RTLD_LOCAL too, so libmemguard.so must search the loaded
objects for c10's symbols). It allocates 24 MiB blocks through mg_torch_binding.alloc
(memguard_alloc inside torch's HANDLE_TH_ERRORS) until one fails: the fifth, after the cache
was freed and a collection ran. Exit code 77 (skipped) when torch cannot be imported.

Environment: MGTEST_LIB (libmemguard.so), MGTEST_FAKE_CUDART, MGTEST_BINDING_DIR (the directory
of the built mg_torch_binding module).
"""
import ctypes
import glob
import json
import os
import subprocess
import sys
import tempfile

MIB = 1 << 20


def child():
    import torch

    ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART"])
    sys.path.insert(0, os.environ["MGTEST_BINDING_DIR"])
    import mg_torch_binding

    held, error = [], None
    try:
        for _ in range(8):
            held.append(mg_torch_binding.alloc(24 * MIB))
    except Exception as e:  # noqa: BLE001: the type is what the test looks at
        error = {"type": f"{type(e).__module__}.{type(e).__qualname__}",
                 "is_torch_oom": isinstance(e, torch.cuda.OutOfMemoryError),
                 "is_runtime_error": isinstance(e, RuntimeError),
                 "message": str(e)}
    print(json.dumps({"held": len(held), "error": error}))


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch cannot be imported: skipped")
        return 77
    with tempfile.TemporaryDirectory(prefix="mg_binding_oom.") as tmp:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C", "HOME": tmp,
               "LD_PRELOAD": os.environ["MGTEST_LIB"],
               "MEMGUARD_OUTPUT": os.path.join(tmp, "report.%p.mgr"),
               "MEMGUARD_REPORT_ENCODING": "text",  # its O records are read below as lines
               "FAKE_CUDA_CAPACITY": str(100 * MIB)}
        for k in ("MGTEST_FAKE_CUDART", "MGTEST_BINDING_DIR"):
            env[k] = os.environ[k]
        p = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print(p.stdout, p.stderr, sep="\n")
            return 1
        result = json.loads(p.stdout.strip().splitlines()[-1])
        print("child:", result)
        reports = glob.glob(os.path.join(tmp, "report.*.mgr"))
        records = []
        for path in reports:
            with open(path, errors="replace") as f:
                records += [line.split() for line in f if line[:2] == "O "]
        print("O records:", records)
    error = result["error"] or {}
    checks = [
        (result["held"] == 4, "four 24 MiB blocks fit in 100 MiB, the fifth fails"),
        (error.get("type") == "torch.OutOfMemoryError", "the exception is torch's OutOfMemoryError"),
        (error.get("is_torch_oom") is True, "isinstance(e, torch.cuda.OutOfMemoryError)"),
        (error.get("message", "").startswith("CUDA out of memory. Tried to allocate 24.00 MiB. GPU 0 has a total capacity of 100.00 MiB"), "PyTorch's message with memguard's figures"),
        (len(reports) == 1 and len(records) == 1, "one O record in the report"),
        (len(records) == 1 and records[0][-1] == "gc", "the failure came after a collection (rescue ran)"),
    ]
    failed = [what for ok, what in checks if not ok]
    for what in failed:
        print("FAILED:", what)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        sys.exit(main())
