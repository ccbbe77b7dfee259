#!/usr/bin/env python3
"""Writes the golden reports of `memguard steps` on growth that collections freed (format 1.9) into
golden/: what became of a growth of live bytes at step ends (docs/steps.md, "What became of the
growth"). The training loop is make_step_oom_reports.py's (/opt/app/train.py, AdamW, six to eight
steps); each report adds what grows.

steps_cycles.mgr: allocator mode. From step 2 each step leaves a 64 MiB tensor in a reference cycle
    (train.py:30); MEMGUARD_GC_EVERY_STEPS=6: the step collection after step 6 (explained: j, u, y)
    frees the five of them (t records with gc 1). Growth over steps 3 to 6, all of it collected.
steps_mixed.mgr: allocator mode. From step 2 a cycle (train.py:30, 64 MiB a step) and a leak
    (train.py:88, 32 MiB a step); in steps 4 to 6 a cache (data.py:12, 16 MiB a step) that the
    program clears in step 7. Two recompute collections in step 7 free the cycles of steps 2 to 5,
    the step collection after step 8 that of step 6; the leak stays through them.
steps_cycles_interpose.mgr: interposition mode. PyTorch's segments: from step 4 to 6 a 64 MiB
    segment a step for tensors in cycles (train.py:30), from step 2 a 32 MiB one for a leak
    (train.py:88). Every step an automatic generation-0 collection frees 8 MiB of tensors; in step 7
    an automatic full collection frees the 192 MiB of cycles, which PyTorch keeps cached.
steps_explained_interpose.mgr: interposition mode. From step 2 a 64 MiB segment a step for a tensor in a
    cycle (train.py:30) and a 16 MiB one for a leak (train.py:88); the step collection after step 6
    (explained: its y records name the five storages) frees the cycles into PyTorch's cache.
steps_held_interpose.mgr: interposition mode. The leak alone; a full explicit collection in every
    step frees 8 MiB (the median: nothing is credited to the growth).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_step_oom_reports import GiB, HEADER, MiB, PARAMS, S, step_moment  # noqa: E402

# Python stacks 7 (the leak at train.py:88) and 8 (a cache at data.py:12), on top of HEADER's.
HEADER9 = HEADER.replace("I format_minor 8\n", "I format_minor 9\n") + """p 12 88 log_loss /opt/app/train.py
p 13 12 cache_batch /opt/app/data.py
P 7 12 3 4
P 8 13 3 4
"""
SEG = 0x7f0000000000
PAR, GRAD, OPT, ACT = SEG, SEG + GiB, SEG + 2 * GiB, SEG + 4 * GiB
CYCLE_SEG, LEAK_SEG, CACHE_SEG = 0x7f1000000000, 0x7f2000000000, 0x7f3000000000


def gc(t, trigger, generation, freed, collected=150, explain="-"):
    """A Y record of minor 9 (skipped 0 for memguard's triggers, '-' for the program's)."""
    skipped = "0" if trigger in ("memguard", "recompute", "step") else "-"
    return "Y %d 4242 %s %d %d %d 0 %d - - %s %s\n" % (t, trigger, generation, 40000000 if generation == 2 else 200000,
                                                       collected, freed, skipped, explain)


def tensor(t, addr, size, pystack):
    return "T %d 4242 %x %d %d 0 0 3 %d 0 -\n" % (t, addr, size, size, pystack)


def allocator_report(steps, per_step):
    """The allocator-mode loop of steps_growth; per_step(k, t0, out) adds what step k keeps."""
    out = [HEADER9.replace("I format_minor 9\n", "I format_minor 9\nI allocator memguard\n")]
    out.append("A %d 4242 7f5000000000 %d device cudaMalloc 0 - 2 0 6\n" % (S // 20, 256 * MiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, SEG, 6 * GiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 5\n" % (S // 10 + 1, CYCLE_SEG, GiB))
    for i, (_, size) in enumerate(PARAMS):
        out.append(tensor(S // 10 + 1000 * i + 2, PAR + i * size, size, 1))
    for k in range(1, steps + 1):
        t0 = (k - 1) * S + S // 5
        for i in range(3):  # the forward's activations, freed by the backward
            out.append(tensor(t0 + S // 10 + i, ACT + i * 128 * MiB, 128 * MiB, 2))
        if k == 1:
            for i in range(2):
                out.append(tensor(t0 + 4 * S // 10 + i, GRAD + i * 512 * MiB, 512 * MiB, 4))
        for i in range(3):
            out.append("t %d 4242 %x 0\n" % (t0 + 5 * S // 10 + i, ACT + i * 128 * MiB))
        out.append(gc(t0 + 6 * S // 10, "automatic", 0, 0))
        if k == 1:
            for i in range(4):
                out.append(tensor(t0 + 7 * S // 10 + i, OPT + i * 512 * MiB, 512 * MiB, 3))
        per_step(k, t0, out)
        t = k * S
        out.append("s %d 4242 %d optimizer AdamW\n" % (t, k))
        out.append(step_moment(k, k, t, PAR, GRAD, OPT))
        per_step(-k, t, out)  # after the step's end
    out.append("Z %d\n" % ((steps + 1) * S))
    return "".join(out)


def steps_cycles():
    def per_step(k, t, out):
        if 2 <= k <= 8:
            out.append(tensor(t + 3 * S // 10, CYCLE_SEG + (k - 2) * 64 * MiB, 64 * MiB, 5))
        if k == -6:  # MEMGUARD_GC_EVERY_STEPS=6: explained, then collected
            out.append("j %d 4242 1 2400 5 %d 3000000 1\n" % (t + 5000000, 320 * MiB))
            out.append("u 1 frame 5 remember /opt/app/train.py:30\n")
            out.append("u 1 type 2390 dict\n")
            for i in range(5):
                out.append("y 1 0 %x %d tensor other_tensor -\n" % (CYCLE_SEG + (4 - i) * 64 * MiB, 64 * MiB))
            for i in range(5):
                out.append("t %d 4242 %x 1\n" % (t + 10000000 + i, CYCLE_SEG + i * 64 * MiB))
            out.append(gc(t + 45000000, "step", 2, 320 * MiB, 2400, "1"))
    return allocator_report(8, per_step)


def steps_mixed():
    def per_step(k, t, out):
        if 2 <= k <= 6:
            out.append(tensor(t + 3 * S // 10, CYCLE_SEG + (k - 2) * 64 * MiB, 64 * MiB, 5))
        if k >= 2:
            out.append(tensor(t + 3 * S // 10 + 10, CYCLE_SEG + GiB // 2 + (k - 2) * 32 * MiB, 32 * MiB, 7))
        if 4 <= k <= 6:
            out.append(tensor(t + 3 * S // 10 + 20, CYCLE_SEG + 3 * GiB // 4 + (k - 4) * 16 * MiB, 16 * MiB, 8))
        if k == 7:  # the backward recomputes two checkpointed regions; the program clears its cache
            for i in range(3):
                out.append("t %d 4242 %x 1\n" % (t + 3 * S // 10 + i, CYCLE_SEG + i * 64 * MiB))
            out.append(gc(t + 3 * S // 10 + 40000000, "recompute", 2, 192 * MiB))
            out.append("t %d 4242 %x 1\n" % (t + 4 * S // 10, CYCLE_SEG + 3 * 64 * MiB))
            out.append(gc(t + 4 * S // 10 + 40000000, "recompute", 2, 64 * MiB))
            for i in range(3):
                out.append("t %d 4242 %x 0\n" % (t + 8 * S // 10 + i, CYCLE_SEG + 3 * GiB // 4 + i * 16 * MiB))
        if k == -8:  # MEMGUARD_GC_EVERY_STEPS=8
            out.append("t %d 4242 %x 1\n" % (t + 10000000, CYCLE_SEG + 4 * 64 * MiB))
            out.append(gc(t + 45000000, "step", 2, 64 * MiB))
    return allocator_report(8, per_step)


def interpose_report(steps, per_step):
    """steps_flat's loop (PyTorch's segments, interposition mode); per_step(k, t0, out) adds step k's."""
    out = [HEADER9]
    out.append("A %d 4242 7f5000000000 %d device cudaMalloc 0 - 2 0 6\n" % (S // 20, 256 * MiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, PAR, GiB))
    for k in range(1, steps + 1):
        t0 = (k - 1) * S + S // 5
        if k == 1:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 2\n" % (t0 + S // 10, ACT, 2 * GiB))
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 4\n" % (t0 + 4 * S // 10, GRAD, GiB))
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 3\n" % (t0 + 7 * S // 10, OPT, 2 * GiB))
        per_step(k, t0, out)
        t = k * S
        out.append("s %d 4242 %d optimizer AdamW\n" % (t, k))
        out.append(step_moment(k, k, t, PAR, GRAD, OPT))
    out.append("Z %d\n" % ((steps + 1) * S))
    return "".join(out)


def steps_cycles_interpose():
    def per_step(k, t, out):
        if 4 <= k <= 6:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 5\n" % (t + 3 * S // 10, CYCLE_SEG + (k - 4) * 64 * MiB,
                                                                        64 * MiB))
        if k >= 2:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 7\n" % (t + 3 * S // 10 + 10,
                                                                        LEAK_SEG + (k - 2) * 32 * MiB, 32 * MiB))
        out.append(gc(t + 6 * S // 10, "automatic", 0, 8 * MiB))
        if k == 7:
            out.append(gc(t + 6 * S // 10 + 50000000, "automatic", 2, 192 * MiB, 2400))
    return interpose_report(8, per_step)


def steps_explained_interpose():
    def per_step(k, t, out):
        if 2 <= k <= 6:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 5\n" % (t + 3 * S // 10, CYCLE_SEG + (k - 2) * 64 * MiB,
                                                                        64 * MiB))
        if k >= 2:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 7\n" % (t + 3 * S // 10 + 10,
                                                                        LEAK_SEG + (k - 2) * 16 * MiB, 16 * MiB))
        if k == 7:  # the step collection after step 6 (MEMGUARD_GC_EVERY_STEPS=6), explained
            out.append("j %d 4242 3 1800 5 %d 2500000 1\n" % (t - S // 5 + 5000000, 320 * MiB))
            out.append("u 3 frame 5 remember /opt/app/train.py:30\n")
            for i in range(5):
                out.append("y 3 0 %x %d tensor activation -\n" % (CYCLE_SEG + (4 - i) * 64 * MiB, 64 * MiB))
            out.append("r 3 %x 0 frame%%20remember%%20train.py:30 local%%20x\n" % (CYCLE_SEG + 4 * 64 * MiB))
            out.append("r 3 %x 1 Tensor%%20float32[16777216]%%20(64.0%%20MiB) -\n" % (CYCLE_SEG + 4 * 64 * MiB))
            out.append(gc(t - S // 5 + 45000000, "step", 2, 320 * MiB, 1800, "3"))
    return interpose_report(8, per_step)


def steps_held_interpose():
    def per_step(k, t, out):
        if k >= 2:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 7\n" % (t + 3 * S // 10 + 10,
                                                                        LEAK_SEG + (k - 2) * 32 * MiB, 32 * MiB))
        out.append(gc(t + 6 * S // 10, "explicit", 2, 8 * MiB))
    return interpose_report(6, per_step)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    for name, text in [("steps_cycles", steps_cycles()), ("steps_mixed", steps_mixed()),
                       ("steps_cycles_interpose", steps_cycles_interpose()),
                       ("steps_explained_interpose", steps_explained_interpose()),
                       ("steps_held_interpose", steps_held_interpose())]:
        with open(os.path.join(here, name + ".mgr"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
