"""Builds a 4,000-op graph and reads it, forever: almost all of its time is spent inside XLA compiles."""
import torch, torch_xla
dev = torch_xla.device()
x = torch.randn(32, 32, device=dev)
k = 0
while True:
    y = x
    for i in range(4000):
        y = torch.tanh(y @ x + (k * 4000 + i))
    k += 1
    print(float(y.sum()))
