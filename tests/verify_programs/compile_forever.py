"""Builds an 8,000-op graph (one compile outlasts the 40 s timeout of its test) and reads it, forever: almost all of its time is spent inside XLA compiles."""
import torch, torch_xla
dev = torch_xla.device()
x = torch.randn(32, 32, device=dev)
k = 0
while True:
    y = x
    for i in range(8000):
        y = torch.tanh(y @ x + (k * 8000 + i))
    k += 1
    print(float(y.sum()))
