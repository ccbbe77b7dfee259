"""A small GPT-style training loop for the GPU acceptance suite.

usage: train_small.py RESULT.json [--steps N]

Deterministic (fixed seeds, deterministic algorithms), so two runs give bitwise-identical losses.
Writes {"losses": [float.hex(), ...], "stats": torch.cuda.memory_stats() subset} to RESULT.json.
"""
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn as nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=1024, d_model=512, layers=4, heads=8, seq=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        x = self.blocks(x, mask=self.mask, is_causal=True)
        return self.head(x)


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 5
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = TinyGPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(1)
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, 1024, (16, 129), generator=gen).to(dev)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    del model, opt, logits, loss, tokens
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # returns cached segments: exercises cudaFree
    stats = torch.cuda.memory_stats()
    keep = {k: v for k, v in stats.items() if k.startswith("num_device_") or k in ("reserved_bytes.all.peak", "allocated_bytes.all.peak")}
    with open(out, "w") as f:
        json.dump({"losses": [float(x).hex() for x in losses], "stats": keep, "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
