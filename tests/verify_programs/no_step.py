"""Runs device code but never reaches a step barrier."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(4, 4, device=dev)
for i in range(3):
    w = w @ w
print("never synced")
