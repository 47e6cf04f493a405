"""A decode loop of small ops, written for CUDA (runs on CPU without it): a 2-layer GRU-free
toy language model generating 300 tokens one at a time with top-k sampling. Op-bound: every
step is ~40 tiny kernels, so an op's recording cost dominates its run time under
``opcheck run``. Used by benchmarks/bench_record.py and for the whole-command ratio in
RESULTS.md (``opcheck run benchmarks/decode_loop.py`` against ``python benchmarks/decode_loop.py``).
"""

import torch

STEPS = 300
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
vocab, dim = 256, 64
emb = torch.nn.Embedding(vocab, dim).to(device)
layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(2)).to(device)
norm = torch.nn.LayerNorm(dim).to(device)
head = torch.nn.Linear(dim, vocab).to(device)
tokens = torch.zeros(1, 1, dtype=torch.long, device=device)
state = torch.zeros(1, dim, device=device)
with torch.no_grad():
    for _ in range(STEPS):
        x = emb(tokens[:, -1])
        for layer in layers:
            x = torch.nn.functional.gelu(layer(x)) + x
        state = 0.9 * state + 0.1 * x
        logits = head(norm(state)) / 0.8
        top, idx = logits.topk(8, dim=-1)
        probs = torch.softmax(top, dim=-1)
        pick = torch.multinomial(probs, 1)
        nxt = idx.gather(-1, pick)
        tokens = torch.cat([tokens, nxt], dim=1)
print("generated", tokens.shape[1] - 1, "tokens")
