"""torch.histc has no XLA lowering: it falls back to the CPU every step. No rule flags it (yet)."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(64, device=dev)
for step in range(50):
    w = torch.sin(w) * 1.5
    hist = torch.histc(w, bins=8, min=-2, max=2)
    w = w + hist.sum() * 1e-3
    torch_xla.sync()
