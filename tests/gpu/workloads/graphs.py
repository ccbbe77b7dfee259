"""CUDA graphs under memguard (GPU acceptance: capture-pool ownership).

usage: graphs.py RESULT.json

Runs torch.cuda.graph capture and replay (with a deliberately retained warm-up output of 256 MiB),
torch.cuda.make_graphed_callables, and torch.compile(mode="reduce-overhead"); writes the results
(as float.hex of sums) and the graph-related figures the checks compare against.
"""
import json
import sys

import torch
import torch.nn as nn

RETAINED_BYTES = 256 << 20


def model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()


def retain_warmup_output():
    # A warm-up output the caller keeps by mistake (the TransformerEngine symptom): big enough to
    # get its own cudaMalloc segment.
    return torch.full((RETAINED_BYTES // 4,), 1.0, device="cuda")


def cuda_graph_replay(results):
    m = model(0)
    static_x = torch.randn(64, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    retained = []
    with torch.cuda.stream(side):
        for _ in range(3):
            m(static_x)
        retained.append(retain_warmup_output())
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # cached but unused warm-up memory goes back; the retained output stays
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = m(static_x)
    sums = []
    gen = torch.Generator(device="cpu").manual_seed(2)
    for _ in range(5):
        static_x.copy_(torch.randn(64, 1024, generator=gen))
        g.replay()
        sums.append(static_y.double().sum().item())
    results["graph_sums"] = [float(s).hex() for s in sums]
    results["graph_replays"] = 5
    del g, static_y
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the private pool's segments go back once the graph is gone
    del retained


def graphed_callables(results):
    m = model(1)
    x = torch.randn(32, 1024, device="cuda", requires_grad=True)
    gm = torch.cuda.make_graphed_callables(m, (x,))
    sums = []
    gen = torch.Generator(device="cpu").manual_seed(3)
    for _ in range(3):
        inp = torch.randn(32, 1024, generator=gen).cuda().requires_grad_()
        out = gm(inp)
        out.sum().backward()
        sums.append(out.double().sum().item())
        sums.append(inp.grad.double().sum().item())
    results["graphed_callables_sums"] = [float(s).hex() for s in sums]


def reduce_overhead(results):
    m = model(2)

    def step(x):
        return m(x).relu().sum(dim=1)

    f = torch.compile(step, mode="reduce-overhead")
    gen = torch.Generator(device="cpu").manual_seed(4)
    sums = []
    with torch.no_grad():
        for _ in range(6):
            y = f(torch.randn(16, 1024, generator=gen).cuda())
            sums.append(y.double().sum().item())
    results["reduce_overhead_sums"] = [float(s).hex() for s in sums]


def main():
    results = {}
    cuda_graph_replay(results)
    graphed_callables(results)
    reduce_overhead(results)
    torch.cuda.synchronize()
    with open(sys.argv[1], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
