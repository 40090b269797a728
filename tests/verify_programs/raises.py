"""Crashes at step 2."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(4, 4, device=dev)
for step in range(10):
    w = w * 0.5
    torch_xla.sync()
    if step == 2:
        raise ValueError("boom at step 2")
