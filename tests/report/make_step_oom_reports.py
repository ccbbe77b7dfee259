#!/usr/bin/env python3
"""Writes the golden reports of `memguard steps` and `memguard oom` (format 1.8) into golden/.

steps_growth.mgr: six optimizer steps; from step 2 each leaves 64 MiB more live (train.py:30).
steps_flat.mgr: the same steps without the leak.
oom_torch.mgr: PyTorch's allocator raises OutOfMemoryError (x torch) after a failed cudaMalloc (E and
    x cuda, folded into it): a fragmented cache (largest free block 2 GiB < request 4 GiB < cached
    free 6 GiB) and 11 GiB held by another process, with a moment listing the live tensors.
oom_cuda.mgr: a failed cuMemCreate with no retry (x cuda), and an older E without an x.
oom_alloc.mgr: allocator mode: an O with its x (source allocator), and an O of an older writer.
oom_recovered.mgr: a failed cudaMalloc that PyTorch retried successfully after freeing its cache.
"""
import os

GiB = 1 << 30
MiB = 1 << 20
S = 1000000000
HEADER = """MEMGUARD-REPORT 1
I format_minor 8
I pid 4242
I exe /opt/memguard-golden/bin/python3
I t0_unix_ns 1764470000000000000
M 0 400000 500000 0 - /opt/memguard-golden/bin/python3
S 1 401000
S 2 402000
S 3 403000
S 4 404000
p 1 12 load_parameters /opt/app/train.py
p 2 41 forward /opt/app/train.py
p 3 30 train_step /opt/app/train.py
p 4 18 step /opt/app/optim.py
P 1 1
P 2 2
P 3 3
P 4 4
"""


def steps(leak):
    out = [HEADER, "A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, GiB)]
    moment = 0
    for k in range(1, 7):
        t = k * S
        act = 0x7f1000000000
        out.append("A %d 4242 %x %d device cudaMalloc 0 - 2 0 2\n" % (t - 6 * S // 10, act, 512 * MiB))
        out.append("F %d 4242 %x %d cudaFree -\n" % (t - 3 * S // 10, act, 512 * MiB))
        if k == 1:
            out.append("A %d 4242 7f0800000000 %d device cudaMalloc 0 - 4 0 4\n" % (t - 2 * S // 10, 512 * MiB))
        if leak and k >= 2:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 3 0 3\n" % (t - S // 10, 0x7f2000000000 + k * 64 * MiB,
                                                                          64 * MiB))
        out.append("s %d 4242 %d optimizer AdamW\n" % (t, k))
        if k in (1, 6):
            moment += 1
            out.append("h %d 4242 %d step %d\n" % (t, moment, k))
            out.append("g %d 0 7f0000000000 %d parameter model.weight\n" % (moment, GiB))
            out.append("g %d 0 7f0800000000 %d optimizer_state AdamW.exp_avg\n" % (moment, 512 * MiB))
            out.append("k %d %d 2 0 1\n" % (t + 1000, moment))
    out.append("Z %d\n" % (7 * S))
    return "".join(out)


def oom_torch():
    out = [HEADER]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 20 * GiB))
    out.append("A %d 4242 7f1000000000 %d device cudaMalloc 0 - 2 0 2\n" % (S // 5, 40 * GiB))
    out.append("B %d 4242 1 api train\n" % (S // 4))
    out.append("s %d 4242 1 optimizer AdamW\n" % S)
    out.append("A %d 4242 7f2000000000 %d device cudaMalloc 0 - 2 0 2\n" % (3 * S // 2, 8 * GiB))
    out.append("s %d 4242 2 optimizer AdamW\n" % (2 * S))
    out.append("Y %d 4242 automatic 2 4000000 1200 0 0 - -\n" % (5 * S // 2))
    t = 3 * S
    out.append("E %d 4242 %d device cudaMalloc 0 - 2 2 %d 2\n" % (t, 4 * GiB, 68 * GiB))
    out.append("x %d 4242 0 cuda %d %d - %d %d - - 2 2 0 0 0\n" % (t + 1000, 4 * GiB, 4 * GiB, GiB, 80 * GiB))
    out.append("h %d 4242 1 oom 2\n" % (t + 2000))
    out.append("g 1 0 7f0000000000 %d parameter model.weight\n" % (10 * GiB))
    out.append("g 1 0 7f0280000000 %d optimizer_state AdamW.exp_avg\n" % (8 * GiB))
    out.append("g 1 0 7f1000000000 %d activation saved%%20by%%20MmBackward0%%20(kept%%20by%%20total_loss)\n" % (36 * GiB))
    for i, (size, state) in enumerate([(2 * GiB, "inactive"), (2 * GiB, "active_allocated"), (2 * GiB, "inactive"),
                                       (GiB, "inactive"), (GiB, "inactive")]):
        addr = 0x7f2000000000 + i * 2 * GiB
        out.append("d 1 0 %x %d %d %s 7f2000000000 -\n" % (addr, size, size if state != "inactive" else 0, state))
    out.append("x %d 4242 0 torch - %d %d %d %d %d %d 2 2 1 1 0\n" % (t + 3000, 4 * GiB, 80 * GiB, GiB, 80 * GiB,
                                                                    62 * GiB, 68 * GiB))
    out.append("k %d 1 3 5 1\n" % (t + 4000))
    out.append("Z %d\n" % (4 * S))
    return "".join(out)


def oom_cuda():
    out = [HEADER]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 70 * GiB))
    out.append("E %d 4243 %d device cuMemCreate 0 - 3 2 %d 3\n" % (S, 16 * GiB, 70 * GiB))
    out.append("x %d 4243 0 cuda %d %d - %d %d - - 3 3 0 0 0\n" % (S + 1000, 16 * GiB, 16 * GiB, 9 * GiB, 80 * GiB))
    out.append("E %d 4242 %d device cudaMalloc 0 7f00aa 2 2 %d 2\n" % (2 * S, 12 * GiB, 70 * GiB))
    out.append("Z %d\n" % (3 * S))
    return "".join(out)


def oom_alloc():
    out = [HEADER.replace("I format_minor 8\n", "I format_minor 8\nI allocator memguard\n")]
    out.append("A %d 500 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 64 * MiB))
    out.append("T %d 500 7f0000000000 %d %d 0 0 1 1 0 -\n" % (S // 10, 16 * MiB, 16 * MiB))
    out.append("T %d 500 7f0001000000 %d %d 0 0 2 2 0 -\n" % (S // 5, 8 * MiB, 8 * MiB))
    out.append("T %d 500 7f0002000000 %d %d 0 0 2 2 0 -\n" % (S // 4, 24 * MiB, 24 * MiB))
    out.append("O %d 500 0 %d %d %d %d %d 2 2 cache\n" % (S, 40 * MiB, 40 * MiB, 48 * MiB, 64 * MiB, 64 * MiB))
    out.append("o %d 1 1 1 %d\n" % (S, 16 * MiB))
    out.append("o %d 2 2 2 %d\n" % (S, 32 * MiB))
    out.append("x %d 500 0 allocator %d %d %d - - %d %d 2 2 0 0 0\n" % (S + 1000, 40 * MiB, 40 * MiB, 64 * MiB,
                                                                     48 * MiB, 64 * MiB))
    out.append("O %d 500 0 %d %d %d %d %d 2 2 none\n" % (2 * S, 32 * MiB, 32 * MiB, 48 * MiB, 64 * MiB, 64 * MiB))
    out.append("Z %d\n" % (3 * S))
    return "".join(out)


def oom_recovered():
    out = [HEADER]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 30 * GiB))
    out.append("A %d 4242 7f1000000000 %d device cudaMalloc 0 - 2 0 2\n" % (S // 5, 8 * GiB))
    out.append("F %d 4242 7f1000000000 %d cudaFree -\n" % (S // 2, 8 * GiB))
    out.append("E %d 4242 %d device cudaMalloc 0 - 2 2 %d 2\n" % (S, 6 * GiB, 30 * GiB))
    out.append("x %d 4242 0 cuda %d %d - %d %d - - 2 2 0 0 0\n" % (S + 1000, 6 * GiB, 6 * GiB, 4 * GiB, 80 * GiB))
    out.append("A %d 4242 7f2000000000 %d device cudaMalloc 0 - 2 0 2\n" % (S + 50000000, 6 * GiB))
    out.append("Z %d\n" % (2 * S))
    return "".join(out)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    for name, text in [("steps_growth", steps(True)), ("steps_flat", steps(False)), ("oom_torch", oom_torch()),
                       ("oom_cuda", oom_cuda()), ("oom_alloc", oom_alloc()), ("oom_recovered", oom_recovered())]:
        with open(os.path.join(here, name + ".mgr"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
