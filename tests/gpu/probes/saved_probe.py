# What torch 2.11 on CUDA gives for SavedTensor.data on each node of the insight workload's graph.
import sys, collections, torch
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "workloads"))
import insight as W
model = W.Model(d=512, layers=1).cuda()
tokens = torch.randint(0, 2048, (4, 65), device="cuda")
loss = W.loss_of(model, tokens)
seen, st, out = set(), [loss.grad_fn], collections.Counter()
while st:
    n = st.pop()
    if n is None or id(n) in seen: continue
    seen.add(id(n))
    for a in [a for a in dir(n) if a.startswith("_raw_saved_")]:
        try:
            r = getattr(n, a); d = getattr(r, "data", "<no .data>")
            kind = type(d).__name__ if not isinstance(d, str) else d
        except Exception as e:
            kind = "ERR " + type(e).__name__ + ": " + str(e)[:80]
        out[(type(n).__name__, a, type(r).__name__ if 'r' in dir() else "?", kind)] += 1
    st.extend(f for f, _ in n.next_functions if f is not None)
for k, v in sorted(out.items()): print(v, k)
print("SavedTensor attrs:", [a for a in dir(torch._C._autograd.SavedTensor) if not a.startswith("__")])
