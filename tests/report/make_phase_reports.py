#!/usr/bin/env python3
"""Writes the format-1.4 golden reports of the issue-6 commands (phases, diff, merge, plot, export):
golden/train.mgr, golden/train_fix.mgr (the same training loop with a fix: smaller activations, a
collection that frees more) and golden/ddp.0.100.mgr, golden/ddp.1.101.mgr (two ranks). Run it
after changing the scenario and review the diff of the golden files.

The scenario: a Python process loads parameters, warms up (a compile, then memguard's collection
of the compile garbage), runs two steps (phase "step" with NVTX ranges forward/backward/optimizer;
the optimizer grows an expandable segment through the driver's virtual memory calls), captures a
CUDA graph, hits an OOM in the second step, and ends inside an "eval" phase that never ended. An
NVTX start/end range ("data loading") overlaps the first step's begin.
"""
import os

MiB = 1 << 20
GiB = 1 << 30
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def ns(seconds):
    return int(round(seconds * 1e9))


def scenario(pid, rank, act, relu, grads, gc_freed, extra_rank_bytes=0):
    main, bwd = pid, pid + 8
    out = ["MEMGUARD-REPORT 1", "I format_minor 4", f"I pid {pid}", "I exe /opt/memguard-golden/bin/python3",
           "I cmdline python3%20train.py", f"I rank {rank}", "I t0_unix_ns 1764470000000000000",
           "M 0 400000 500000 0 - /opt/memguard-golden/bin/python3",
           "M 1 7f1000000000 7f1000400000 7f1000000000 - /opt/memguard-golden/lib/libtorch_cuda.so",
           "S 1 7f1000001000 401000", "S 2 7f1000002000 401000", "S 3 7f1000003000 401000",
           "S 4 7f1000004000 401000", "S 5 7f1000005000 401000",
           "p 1 12 load_parameters /opt/app/train.py", "p 2 134 forward /opt/torch/nn/modules/linear.py",
           "p 3 1723 relu /opt/torch/nn/functional.py", "p 4 88 backward /opt/torch/autograd/graph.py",
           "p 5 40 step /opt/app/train.py", "p 6 230 step /opt/torch/optim/adamw.py",
           "P 1 1", "P 2 2 5", "P 3 3 5", "P 4 4 5", "P 5 6 5"]
    A = lambda t, tid, addr, size, stack, py, cap=0: out.append(
        f"A {ns(t)} {tid} {addr} {size} device cudaMalloc 0 - {stack} {cap} {py}")
    F = lambda t, tid, addr, size: out.append(f"F {ns(t)} {tid} {addr} {size} cudaFree -")
    ev = lambda s: out.append(s)
    A(0.05, main, "7f0000000000", 512 * MiB + extra_rank_bytes, 1, 1)
    ev(f"B {ns(0.1)} {main} 1 api warmup")
    A(0.2, main, "7f2000000000", act, 2, 2)
    A(0.3, main, "7f2100000000", 256 * MiB, 3, 3)
    F(0.5, main, "7f2000000000", act)
    ev(f"X {ns(0.6)} {main} 0/0")
    ev(f"b {ns(0.8)} {main} 1")
    F(0.89, main, "7f2100000000", 256 * MiB)
    ev(f"Y {ns(0.9)} {main} memguard 2 4000000 1500 0 {gc_freed} 0/0 300000000")
    ev(f"B {ns(0.95)} {main} 6 nvtx_range data%20loading")
    ev(f"J {ns(1.0)} {main} api step%200")
    ev(f"B {ns(1.0)} {main} 2 api step")
    ev(f"B {ns(1.0)} {main} 3 nvtx forward")
    A(1.1, main, "7f3000000000", act, 2, 2)
    A(1.2, main, "7f3100000000", relu, 3, 3)
    ev(f"b {ns(1.3)} {main} 6")
    ev(f"b {ns(1.5)} {main} 3")
    ev(f"B {ns(1.5)} {main} 4 nvtx backward")
    A(1.6, bwd, "7f3200000000", grads, 4, 4)
    F(1.8, bwd, "7f3000000000", act)
    F(1.9, bwd, "7f3100000000", relu)
    ev(f"b {ns(2.0)} {main} 4")
    ev(f"B {ns(2.0)} {main} 5 nvtx optimizer")
    ev(f"V {ns(2.05)} {main} 7f4000000000 {2 * GiB} 5 5")
    ev(f"N {ns(2.06)} {main} 1a2b {256 * MiB} 0 5 5 0")
    ev(f"Q {ns(2.07)} {main} 7f4000000000 {256 * MiB} 0 1a2b")
    ev(f"b {ns(2.3)} {main} 5")
    ev(f"b {ns(2.3)} {main} 2")
    ev(f"C {ns(2.5)} {main} 1 7fee00000000 thread_local -")
    A(2.55, main, "7f5000000000", 64 * MiB, 2, 2, cap=1)
    ev(f"c {ns(2.6)} {main} 1 0 9a00")
    ev(f"J {ns(2.7)} {main} api step%201")
    ev(f"B {ns(2.7)} {main} 7 api step")
    ev(f"B {ns(2.7)} {main} 8 nvtx forward")
    A(2.8, main, "7f3000000000", act, 2, 2)
    ev(f"E {ns(2.9)} {main} {4 * GiB} device cudaMalloc 0 - 3 2 {2 * GiB} 3")
    F(3.1, main, "7f3000000000", act)
    ev(f"b {ns(3.1)} {main} 8")
    ev(f"b {ns(3.2)} {main} 7")
    ev(f"q {ns(3.3)} {main} 7f4000000000 {256 * MiB}")
    ev(f"n {ns(3.35)} {main} 1a2b")
    ev(f"v {ns(3.4)} {main} 7f4000000000 {2 * GiB}")
    ev(f"H {ns(3.45)}")
    ev(f"B {ns(3.5)} {main} 9 api eval")
    A(3.6, main, "7f6000000000", 128 * MiB, 2, 2)
    ev(f"Y {ns(3.7)} {main} explicit 2 2000000 40 0 0 - -")
    ev(f"Z {ns(4.0)}")
    return "\n".join(out) + "\n"


def write(name, text):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(text)


if __name__ == "__main__":
    write("train.mgr", scenario(4242, 0, act=1 * GiB, relu=512 * MiB, grads=768 * MiB, gc_freed=256 * MiB))
    write("train_fix.mgr", scenario(4300, 0, act=768 * MiB, relu=256 * MiB, grads=768 * MiB, gc_freed=512 * MiB))
    write("ddp.0.100.mgr", scenario(100, 0, act=1 * GiB, relu=512 * MiB, grads=768 * MiB, gc_freed=256 * MiB))
    write("ddp.1.101.mgr", scenario(101, 1, act=1 * GiB, relu=512 * MiB, grads=768 * MiB, gc_freed=256 * MiB,
                                    extra_rank_bytes=128 * MiB))
