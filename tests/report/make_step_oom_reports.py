#!/usr/bin/env python3
"""Writes the golden reports of `memguard steps` and `memguard oom` (format 1.8) into golden/.

Each report is what the library writes for a PyTorch training script (/opt/app/train.py with its
model in /opt/app/model.py): native stacks through the CUDA runtime into PyTorch's libc10_cuda /
libtorch_cuda (the caching allocator's segments) or into NCCL, Python stacks down to the user's
lines, moments whose g tags name parameters, gradients, optimizer state and the tensors autograd
graphs saved, and PyTorch's allocator blocks (d) where the library writes them.

steps_flat.mgr: interposition mode, DDP with AdamW: NCCL's buffer, then PyTorch's segments for the
    parameters, activations (cached after step 1), gradients and optimizer state; six steps that
    end where they began. Step 1's moment has d blocks (it raised the peak).
steps_growth.mgr: allocator mode (T blocks): the same loop, but from step 2 each step keeps 64 MiB
    more (a tensor kept by a reference cycle made at train.py:30).
oom_torch.mgr: the classic bug: `total_loss += loss` (train.py:57) keeps every step's autograd graph
    with the tensors it saved for backward. Under a per-process memory fraction (36 GiB of 80 GiB)
    PyTorch raises OutOfMemoryError in step 8's forward without any cudaMalloc failing (x torch,
    with an OOM moment: tags and d blocks).
oom_frag.mgr: a fragmented cache: variable-length batches leave 8 GiB cached free in blocks of at
    most 1.5 GiB; a 3 GiB request over the memory fraction fails although the cache holds more.
oom_others.mgr: other processes hold 44.5 GiB of the device: cudaMalloc fails (E, x cuda), PyTorch
    frees its cache, retries, fails again and raises (x torch).
oom_cuda.mgr: NCCL's cuMemCreate fails (x cuda, no PyTorch retry), and an older E without an x.
oom_alloc.mgr: allocator mode: an O with its x (source allocator) and an OOM moment with tags, and
    an O of an older writer.
oom_recovered.mgr: a failed cudaMalloc that PyTorch retried successfully after freeing its cache.
"""
import os

GiB = 1 << 30
MiB = 1 << 20
S = 1000000000
LABEL_KEPT = "saved%20by%20{}%20(kept%20by%20total_loss%20at%20train.py:57)"
HEADER = """MEMGUARD-REPORT 1
I format_minor 8
I pid 4242
I exe /opt/memguard-golden/bin/python3
I cmdline python3%20train.py
I t0_unix_ns 1764470000000000000
M 0 1000 2000 0 - /opt/memguard-golden/lib/libcudart.so.12
M 1 3000 4000 0 - /opt/memguard-golden/torch/lib/libc10_cuda.so
M 2 5000 6000 0 - /opt/memguard-golden/torch/lib/libtorch_cuda.so
M 3 7000 8000 0 - /opt/memguard-golden/lib/libnccl.so.2
M 4 b000 c000 0 - /opt/memguard-golden/bin/python3
S 1 1100 3100 b100
S 2 1100 7100 5100 b100
S 3 5100 b100
p 1 14 <module> /opt/app/train.py
p 2 41 forward /opt/app/model.py
p 3 55 train_step /opt/app/train.py
p 4 70 <module> /opt/app/train.py
p 5 180 _single_tensor_adamw /usr/lib/python3/site-packages/torch/optim/adamw.py
p 6 58 train_step /opt/app/train.py
p 7 581 backward /usr/lib/python3/site-packages/torch/_tensor.py
p 8 56 train_step /opt/app/train.py
p 9 30 remember /opt/app/train.py
p 10 1480 init_process_group /usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py
p 11 10 <module> /opt/app/train.py
P 1 1
P 2 2 3 4
P 3 5 6 4
P 4 7 8 4
P 5 9 3 4
P 6 10 11
"""
# Native stacks: 1 PyTorch's caching allocator (libc10_cuda) through the runtime, 2 NCCL through
# the runtime (under libtorch_cuda's ProcessGroupNCCL), 3 PyTorch's allocator in allocator mode.
# Python stacks: 1 the model's parameters (train.py:14), 2 the forward (model.py:41 under
# train.py:55), 3 AdamW's state (train.py:58), 4 backward (train.py:56), 5 the leak (train.py:30),
# 6 NCCL's setup (train.py:10).
PARAMS = [("fc1.weight", 512 * MiB), ("fc2.weight", 512 * MiB)]


def step_moment(moment, step, t, base_param, base_grad, base_opt, blocks=()):
    """A step moment: parameters, their gradients and AdamW's state, each storage at its address."""
    out = ["h %d 4242 %d step %d\n" % (t, moment, step)]
    tags = 0
    for i, (name, size) in enumerate(PARAMS):
        out.append("g %d 0 %x %d parameter %s\n" % (moment, base_param + i * size, size, name))
        out.append("g %d 0 %x %d gradient %s\n" % (moment, base_grad + i * size, size, name))
        out.append("g %d 0 %x %d optimizer_state AdamW.exp_avg\n" % (moment, base_opt + 2 * i * size, size))
        out.append("g %d 0 %x %d optimizer_state AdamW.exp_avg_sq\n" % (moment, base_opt + (2 * i + 1) * size, size))
        tags += 4
    for addr, size, requested, state, segment in blocks:
        out.append("d %d 0 %x %d %d %s %x -\n" % (moment, addr, size, requested, state, segment))
    out.append("k %d %d %d %d 1\n" % (t + 2000000, moment, tags, len(blocks)))
    return "".join(out)


def steps_flat():
    """Interposition mode: PyTorch's segments grow in step 1 and are reused by every later step."""
    par, grad, opt, act = 0x7f0000000000, 0x7f0800000000, 0x7f0c00000000, 0x7f1000000000
    out = [HEADER]
    out.append("A %d 4242 7f5000000000 %d device cudaMalloc 0 - 2 0 6\n" % (S // 20, 256 * MiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, par, GiB))
    for k in range(1, 7):
        t0 = (k - 1) * S + S // 5
        if k == 1:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 2\n" % (t0 + S // 10, act, 2 * GiB))
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 4\n" % (t0 + 4 * S // 10, grad, GiB))
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 3\n" % (t0 + 7 * S // 10, opt, 2 * GiB))
        t = k * S
        out.append("s %d 4242 %d optimizer AdamW\n" % (t, k))
        blocks = []
        if k == 1:  # the step raised the peak: PyTorch's allocator blocks too
            blocks = [(par + i * 512 * MiB, 512 * MiB, 512 * MiB, "active_allocated", par) for i in range(2)]
            blocks += [(grad + i * 512 * MiB, 512 * MiB, 512 * MiB, "active_allocated", grad) for i in range(2)]
            blocks += [(opt + i * 512 * MiB, 512 * MiB, 512 * MiB, "active_allocated", opt) for i in range(4)]
            blocks += [(act, 2 * GiB, 0, "inactive", act)]
        out.append(step_moment(k, k, t, par, grad, opt, blocks))
    out.append("Z %d\n" % (7 * S))
    return "".join(out)


def steps_growth():
    """Allocator mode: tensor blocks; from step 2 one 64 MiB tensor a step is never freed."""
    seg, leak_seg = 0x7f0000000000, 0x7f1000000000
    par, grad, opt, act = seg, seg + GiB, seg + 2 * GiB, seg + 4 * GiB
    out = [HEADER.replace("I format_minor 8\n", "I format_minor 8\nI allocator memguard\n")]
    out.append("A %d 4242 7f5000000000 %d device cudaMalloc 0 - 2 0 6\n" % (S // 20, 256 * MiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, seg, 6 * GiB))
    for i, (_, size) in enumerate(PARAMS):
        out.append("T %d 4242 %x %d %d 0 0 3 1 0 -\n" % (S // 10 + 1000 * i, par + i * size, size, size))
    for k in range(1, 7):
        t0 = (k - 1) * S + S // 5
        for i in range(3):  # the forward's activations, freed by the backward
            out.append("T %d 4242 %x %d %d 0 0 3 2 0 -\n" % (t0 + S // 10 + i, act + i * 128 * MiB, 128 * MiB,
                                                            128 * MiB))
        if k >= 2:
            if k == 2:
                out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 5\n" % (t0 + 3 * S // 10, leak_seg, GiB))
            out.append("T %d 4242 %x %d %d 0 0 3 5 0 -\n" % (t0 + 3 * S // 10 + 1, leak_seg + (k - 2) * 64 * MiB,
                                                            64 * MiB, 64 * MiB))
        if k == 1:
            for i in range(2):
                out.append("T %d 4242 %x %d %d 0 0 3 4 0 -\n" % (t0 + 4 * S // 10 + i, grad + i * 512 * MiB,
                                                                512 * MiB, 512 * MiB))
        for i in range(3):
            out.append("t %d 4242 %x 0\n" % (t0 + 5 * S // 10 + i, act + i * 128 * MiB))
        if k == 1:
            for i in range(4):
                out.append("T %d 4242 %x %d %d 0 0 3 3 0 -\n" % (t0 + 7 * S // 10 + i, opt + i * 512 * MiB,
                                                                512 * MiB, 512 * MiB))
        t = k * S
        out.append("s %d 4242 %d optimizer AdamW\n" % (t, k))
        out.append(step_moment(k, k, t, par, grad, opt))
    out.append("Z %d\n" % (7 * S))
    return "".join(out)


def model_setup(out, par, grad, opt, act, act_size, phase=False):
    """Parameters (train.py:14), step 1's activations (model.py:41), then its gradients and AdamW
    state: 8 GiB and the activations in four segments."""
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, par, 2 * GiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 2\n" % (S // 5, act, act_size))
    if phase:
        out.append("B %d 4242 1 api train\n" % (S // 4))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 4\n" % (S // 2, grad, 2 * GiB))
    out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 3\n" % (7 * S // 10, opt, 4 * GiB))


def big_moment_tags(moment, par, grad, opt):
    """Tags of parameters (2 x 1 GiB), their gradients and AdamW's state (4 x 1 GiB), with d blocks."""
    tags, blocks = [], []
    for i, name in enumerate(["fc1.weight", "fc2.weight"]):
        tags.append("g %d 0 %x %d parameter %s\n" % (moment, par + i * GiB, GiB, name))
        tags.append("g %d 0 %x %d gradient %s\n" % (moment, grad + i * GiB, GiB, name))
        blocks.append("d %d 0 %x %d %d active_allocated %x -\n" % (moment, par + i * GiB, GiB, GiB, par))
        blocks.append("d %d 0 %x %d %d active_allocated %x -\n" % (moment, grad + i * GiB, GiB, GiB, grad))
    for i in range(4):
        name = "AdamW.exp_avg" if i % 2 == 0 else "AdamW.exp_avg_sq"
        tags.append("g %d 0 %x %d optimizer_state %s\n" % (moment, opt + i * GiB, GiB, name))
        blocks.append("d %d 0 %x %d %d active_allocated %x -\n" % (moment, opt + i * GiB, GiB, GiB, opt))
    return tags, blocks


def oom_torch():
    par, grad, opt, act = 0x7f0000000000, 0x7f0800000000, 0x7f0c00000000, 0x7f1000000000
    out = [HEADER]
    model_setup(out, par, grad, opt, act, 4 * GiB)
    # Every step's forward needs a new 4 GiB segment: total_loss keeps the last one's saved tensors.
    for k in range(1, 8):
        if k > 1:
            out.append("A %d 4242 %x %d device cudaMalloc 0 - 1 0 2\n" % ((k - 1) * S + S // 5,
                                                                          act + (k - 1) * 4 * GiB, 4 * GiB))
        out.append("s %d 4242 %d optimizer AdamW\n" % (k * S, k))
    t = 7 * S + S // 2
    tags, blocks = big_moment_tags(1, par, grad, opt)
    for k in range(7):
        seg = act + k * 4 * GiB
        tags.append("g 1 0 %x %d activation %s\n" % (seg, 2 * GiB, LABEL_KEPT.format("MmBackward0")))
        tags.append("g 1 0 %x %d activation %s\n" % (seg + 2 * GiB, 3 * GiB // 2, LABEL_KEPT.format("ReluBackward0")))
        blocks.append("d 1 0 %x %d %d active_allocated %x -\n" % (seg, 2 * GiB, 2 * GiB, seg))
        blocks.append("d 1 0 %x %d %d active_allocated %x -\n" % (seg + 2 * GiB, 3 * GiB // 2, 3 * GiB // 2, seg))
        blocks.append("d 1 0 %x %d 0 inactive %x -\n" % (seg + 7 * GiB // 2, GiB // 2, seg))
    out.append("h %d 4242 1 oom 7\n" % t)
    out += tags + blocks
    out.append("x %d 4242 0 torch %d %d %d %d %d %d %d 1 2 1 0 0\n" % (t + 100000, 4 * GiB, 4 * GiB, 36 * GiB,
                                                                       43 * GiB + GiB // 2, 80 * GiB,
                                                                       32 * GiB + GiB // 2, 36 * GiB))
    out.append("k %d 1 %d %d 1\n" % (t + 200000, len(tags), len(blocks)))
    out.append("Z %d\n" % (8 * S))
    return "".join(out)


def oom_frag():
    par, grad, opt, act = 0x7f0000000000, 0x7f0800000000, 0x7f0c00000000, 0x7f1000000000
    out = [HEADER]
    model_setup(out, par, grad, opt, act, 22 * GiB, phase=True)
    for k in range(1, 4):
        out.append("s %d 4242 %d optimizer AdamW\n" % (k * S, k))
    out.append("Y %d 4242 automatic 2 4000000 1200 0 0 - -\n" % (7 * S // 2))
    t = 4 * S
    tags, blocks = big_moment_tags(1, par, grad, opt)
    # The activation segment, cut by batches of varying length: live saved tensors between free
    # blocks of 0.5 to 1.5 GiB (8 GiB free in all, none of 3 GiB).
    at = act
    for live, free in [(2, 1.5), (3, 1.5), (2, 1), (3, 1.5), (1, 1.5), (3, 1)]:
        live_b, free_b = int(live * GiB), int(free * GiB)
        tags.append("g 1 0 %x %d activation saved%%20by%%20MmBackward0\n" % (at, live_b))
        blocks.append("d 1 0 %x %d %d active_allocated %x -\n" % (at, live_b, live_b, act))
        blocks.append("d 1 0 %x %d 0 inactive %x -\n" % (at + live_b, free_b, act))
        at += live_b + free_b
    out.append("h %d 4242 1 oom 3\n" % t)
    out += tags + blocks
    out.append("x %d 4242 0 torch %d %d %d %d %d %d %d 1 2 1 0 0\n" % (t + 100000, 3 * GiB, 3 * GiB, 32 * GiB,
                                                                       49 * GiB + GiB // 2, 80 * GiB, 22 * GiB,
                                                                       30 * GiB))
    out.append("k %d 1 %d %d 1\n" % (t + 200000, len(tags), len(blocks)))
    out.append("Z %d\n" % (5 * S))
    return "".join(out)


def oom_others():
    par, grad, opt, act = 0x7f0000000000, 0x7f0800000000, 0x7f0c00000000, 0x7f1000000000
    out = [HEADER]
    model_setup(out, par, grad, opt, act, 26 * GiB)
    out.append("s %d 4242 1 optimizer AdamW\n" % S)
    t = 3 * S // 2
    out.append("E %d 4242 %d device cudaMalloc 0 - 1 2 %d 2\n" % (t, 2 * GiB, 34 * GiB))
    out.append("x %d 4242 0 cuda %d %d - %d %d - - 1 2 0 0 0\n" % (t + 1000, 2 * GiB, 2 * GiB, GiB + GiB // 2,
                                                                   80 * GiB))
    tags, blocks = big_moment_tags(1, par, grad, opt)
    tags.append("g 1 0 %x %d activation saved%%20by%%20MmBackward0\n" % (act, 25 * GiB))
    blocks.append("d 1 0 %x %d %d active_allocated %x -\n" % (act, 25 * GiB, 25 * GiB, act))
    blocks.append("d 1 0 %x %d 0 inactive %x -\n" % (act + 25 * GiB, GiB, act))
    out.append("h %d 4242 1 oom 1\n" % (t + 2000))
    out += tags + blocks
    out.append("x %d 4242 0 torch %d %d %d %d %d %d %d 1 2 1 0 0\n" % (t + 3000, 2 * GiB, 2 * GiB, 80 * GiB,
                                                                       GiB + GiB // 2, 80 * GiB, 33 * GiB,
                                                                       34 * GiB))
    out.append("k %d 1 %d %d 1\n" % (t + 4000, len(tags), len(blocks)))
    out.append("Z %d\n" % (2 * S))
    return "".join(out)


def oom_cuda():
    out = [HEADER]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 2\n" % (S // 10, 70 * GiB))
    out.append("E %d 4243 %d device cuMemCreate 0 - 2 2 %d 6\n" % (S, 16 * GiB, 70 * GiB))
    out.append("x %d 4243 0 cuda %d %d - %d %d - - 2 6 0 0 0\n" % (S + 1000, 16 * GiB, 16 * GiB, 9 * GiB, 80 * GiB))
    out.append("E %d 4242 %d device cudaMalloc 0 7f00aa 1 2 %d 2\n" % (2 * S, 12 * GiB, 70 * GiB))
    out.append("Z %d\n" % (3 * S))
    return "".join(out)


def oom_alloc():
    out = [HEADER.replace("I format_minor 8\n", "I format_minor 8\nI allocator memguard\n")]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 64 * MiB))
    out.append("T %d 4242 7f0000000000 %d %d 0 0 3 1 0 -\n" % (S // 10, 16 * MiB, 16 * MiB))
    out.append("T %d 4242 7f0001000000 %d %d 0 0 3 2 0 -\n" % (S // 5, 8 * MiB, 8 * MiB))
    out.append("T %d 4242 7f0002000000 %d %d 0 0 3 2 0 -\n" % (S // 4, 24 * MiB, 24 * MiB))
    out.append("O %d 4242 0 %d %d %d %d %d 3 2 cache\n" % (S, 40 * MiB, 40 * MiB, 48 * MiB, 64 * MiB, 64 * MiB))
    out.append("o %d 3 2 2 %d\n" % (S, 32 * MiB))
    out.append("o %d 3 1 1 %d\n" % (S, 16 * MiB))
    out.append("h %d 4242 1 oom 0\n" % (S + 500))
    out.append("g 1 0 7f0000000000 %d parameter fc1.weight\n" % (16 * MiB))
    out.append("g 1 0 7f0001000000 %d activation %s\n" % (8 * MiB, LABEL_KEPT.format("ReluBackward0")))
    out.append("g 1 0 7f0002000000 %d activation %s\n" % (24 * MiB, LABEL_KEPT.format("MmBackward0")))
    out.append("x %d 4242 0 allocator %d %d %d - - %d %d 3 2 1 0 0\n" % (S + 1000, 40 * MiB, 40 * MiB, 64 * MiB,
                                                                      48 * MiB, 64 * MiB))
    out.append("k %d 1 3 0 1\n" % (S + 2000))
    out.append("O %d 4242 0 %d %d %d %d %d 3 2 none\n" % (2 * S, 32 * MiB, 32 * MiB, 48 * MiB, 64 * MiB, 64 * MiB))
    out.append("Z %d\n" % (3 * S))
    return "".join(out)


def oom_gc():
    """oom_frag with a busy interpreter's collections before the OOM: 40 automatic gen-0 ones, 4 gen-1,
    two that freed CUDA memory (what `oom` names) and one whose counter went down by other threads."""
    ys = []
    for i in range(48):
        t = 3 * S + i * S // 100
        gen, trigger, freed = 0, "automatic", 0
        if i % 10 == 9:
            gen = 1
        if i == 20:
            gen, freed = 2, 512 * MiB
        if i == 30:
            trigger, gen, freed = "explicit", 2, GiB
        if i == 40:
            freed = -4 * MiB
        ys.append("Y %d 4242 %s %d 4000000 12 0 %d - -\n" % (t, trigger, gen, freed))
    text = oom_frag()
    at = text.index("Y ")
    return text[:at] + "".join(ys) + text[at:]


def oom_recovered():
    out = [HEADER]
    out.append("A %d 4242 7f0000000000 %d device cudaMalloc 0 - 1 0 1\n" % (S // 10, 30 * GiB))
    out.append("A %d 4242 7f1000000000 %d device cudaMalloc 0 - 1 0 2\n" % (S // 5, 8 * GiB))
    out.append("F %d 4242 7f1000000000 %d cudaFree -\n" % (S // 2, 8 * GiB))
    out.append("E %d 4242 %d device cudaMalloc 0 - 1 2 %d 2\n" % (S, 6 * GiB, 30 * GiB))
    out.append("x %d 4242 0 cuda %d %d - %d %d - - 1 2 0 0 0\n" % (S + 1000, 6 * GiB, 6 * GiB, 4 * GiB, 80 * GiB))
    out.append("A %d 4242 7f2000000000 %d device cudaMalloc 0 - 1 0 2\n" % (S + 50000000, 6 * GiB))
    out.append("Z %d\n" % (2 * S))
    return "".join(out)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    for name, text in [("steps_growth", steps_growth()), ("steps_flat", steps_flat()), ("oom_torch", oom_torch()),
                       ("oom_frag", oom_frag()), ("oom_others", oom_others()), ("oom_cuda", oom_cuda()),
                       ("oom_alloc", oom_alloc()), ("oom_recovered", oom_recovered()),
                       ("oom_gc", oom_gc())]:
        with open(os.path.join(here, name + ".mgr"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
