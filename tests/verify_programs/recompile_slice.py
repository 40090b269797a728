"""A slice whose length changes every step: a new graph (and a compile) every step."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(16, 16, device=dev)
x = torch.randn(8, 16, device=dev)
for step in range(50):
    n = 4 + step % 9
    part = x[:, :n]
    y = part @ w[:n]
    x = torch.tanh(y)
    torch_xla.sync()
