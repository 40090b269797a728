"""A nanoGPT-style character-level GPT trained on random tokens, written for GPU: with `--device=xla` its
loop never reaches a step barrier (no torch_xla.sync(), no MpDeviceLoader), so the lazy graph grows every
iteration. `--barrier` adds the one line that fixes it."""
import argparse
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cpu")
parser.add_argument("--max-iters", type=int, default=50)
parser.add_argument("--barrier", action="store_true")
args = parser.parse_args()

if args.device == "xla":
    import torch_xla

    device = torch_xla.device()
else:
    device = torch.device(args.device)

block_size, vocab_size, n_layer, n_head, n_embd, batch_size = 16, 65, 2, 2, 32, 4
eval_interval, eval_iters, log_interval = 20, 2, 1


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_batch():
    data = torch.randint(0, vocab_size, (batch_size, block_size + 1))
    return data[:, :-1].to(device), data[:, 1:].to(device)


@torch.no_grad()
def estimate_loss(model):
    model.eval()
    losses = torch.zeros(eval_iters)
    for k in range(eval_iters):
        X, Y = get_batch()
        _, loss = model(X, Y)
        losses[k] = loss.item()
    model.train()
    return losses.mean()


model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for iter_num in range(args.max_iters):
    if iter_num % eval_interval == 0:
        print(f"step {iter_num}: val loss {estimate_loss(model):.4f}")
    X, Y = get_batch()
    logits, loss = model(X, Y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if args.barrier:
        torch_xla.sync()
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}")
