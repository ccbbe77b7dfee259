"""The programs that tests/launch/test_launch.py runs under `memguard run`: each allocates CUDA
memory through memguard's fake runtime (the fake libcudart loaded as PyTorch loads the real one,
the allocation made through the global scope, where libmemguard.so's cudaMalloc comes first).

    launch_child.py SCENARIO [ARGS...]      (MGTEST_FAKE_CUDART names the fake runtime)

Scenarios:
  alloc_exit CODE       allocate, exit with CODE
  alloc_signal SIG      allocate, then end by signal SIG (its default action)
  wait_signals          allocate, print "ready", exit with 40 + the number of SIGINT/SIGTERM
                        deliveries (counted until 0.5 s after the first), or 99 after 30 s
  env                   print LD_PRELOAD and the MEMGUARD_* variables as JSON; no allocation
  ranks N               a fake launcher: N children with RANK=0..N-1 (and LOCAL_RANK, WORLD_SIZE),
                        each allocating; exits 0 when all did
  ranks_mib M0,M1,...   a fake launcher as `ranks`: rank R allocates MR MiB (in blocks of at most
                        64 MiB), frees 1 MiB of it, exits 0
  mp METHOD N           allocate, then N multiprocessing workers (start method METHOD) allocate
  subprocess N          allocate, then N subprocesses (python launch_child.py alloc_exit 0)
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

_cuda = None


def alloc(size=1 << 20):
    """cudaMalloc(size) through the process's global scope (memguard's hook when preloaded)."""
    global _cuda
    if _cuda is None:
        ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART"])  # RTLD_LOCAL, as PyTorch loads the runtime
        _cuda = ctypes.CDLL(None)
    ptr = ctypes.c_void_p()
    rc = _cuda.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
    if rc != 0:
        print(f"cudaMalloc returned {rc}", file=sys.stderr)
        sys.exit(98)
    return ptr.value


def _worker(i):
    alloc((i + 2) << 20)


def main(argv):
    what = argv[1]
    if what == "alloc_exit":
        alloc()
        sys.exit(int(argv[2]))
    if what == "alloc_signal":
        alloc()
        sys.stdout.flush()
        sig = int(argv[2])
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(10)
        sys.exit(97)
    if what == "wait_signals":
        alloc()
        # Python runs a handler once for signals that arrive together; its C handler writes every
        # delivery to the wakeup fd. The loop keeps the process on a CPU, so that a delivery is
        # taken at once (a second signal sent while the first is still pending would merge with it).
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        got = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda s, f: got.append(s))
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not got:
            pass
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        signal.set_wakeup_fd(-1)
        os.set_blocking(r, False)
        try:
            delivered = os.read(r, 64)
        except BlockingIOError:
            delivered = b""
        print("signals", ",".join(signal.Signals(b).name for b in delivered), flush=True)
        sys.exit(40 + len(delivered) if delivered else 99)
    if what == "env":
        keys = [k for k in os.environ if k == "LD_PRELOAD" or k.startswith("MEMGUARD_")]
        print(json.dumps({k: os.environ[k] for k in sorted(keys)}))
        return
    if what == "ranks":
        n = int(argv[2])
        procs = []
        for rank in range(n):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n))
            procs.append(subprocess.Popen([sys.executable, __file__, "alloc_exit", "0"], env=env))
        sys.exit(max(p.wait() for p in procs))
    if what == "ranks_mib":
        sizes = [int(m) for m in argv[2].split(",")]
        procs = []
        for rank, mib in enumerate(sizes):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(len(sizes)))
            procs.append(subprocess.Popen([sys.executable, __file__, "alloc_mib", str(mib)], env=env))
        sys.exit(max(p.wait() for p in procs))
    if what == "alloc_mib":
        left = int(argv[2])
        while left > 0:
            alloc(min(left, 64) << 20)
            left -= min(left, 64)
        _cuda.cudaFree(ctypes.c_void_p(alloc(1 << 20)))
        sys.exit(0)
    if what == "mp":
        import multiprocessing
        alloc()
        ctx = multiprocessing.get_context(argv[2])
        workers = [ctx.Process(target=_worker, args=(i,)) for i in range(int(argv[3]))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        sys.exit(max(w.exitcode for w in workers))
    if what == "subprocess":
        alloc()
        codes = [subprocess.run([sys.executable, __file__, "alloc_exit", "0"]).returncode
                 for _ in range(int(argv[2]))]
        sys.exit(max(codes))
    print(f"unknown scenario {what}", file=sys.stderr)
    sys.exit(96)


if __name__ == "__main__":
    main(sys.argv)
