"""The anti-pattern is in a local helper module: attribution must land in helper_mod.py."""
import torch
import torch_xla

from helper_mod import log_loss

dev = torch_xla.device()
w = torch.randn(8, 8, device=dev)
history = []
for step in range(50):
    w = torch.tanh(w @ w)
    log_loss(history, w.mean())
    torch_xla.sync()
